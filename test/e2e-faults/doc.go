// Package e2efaults holds the runtime's fault, expiry, orphan and bad-input tests on
// real API servers (internal/harness). Every scenario ends by counting what remains on the
// platform and workload clusters, so that a leak fails the test, not only a wrong
// status. docs/reliability.md lists what is verified and how to run it.
//
// Each test has servers of its own (a standard-mode runtime serves every object of its
// onboarding cluster, and most tests configure the local platform or break a server),
// and the tests run in parallel: they spend most of their time waiting for expiries,
// retries and grants, not computing (docs/design/shared-test-servers.md).
package e2efaults
