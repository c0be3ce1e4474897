// Package e2efaults holds the runtime's fault, expiry, orphan and bad-input tests on
// real API servers (testkit/harness). Every scenario ends by counting what remains on the
// platform and workload clusters, so that a leak fails the test, not only a wrong
// status. docs/reliability.md lists what is verified and how to run it.
package e2efaults
