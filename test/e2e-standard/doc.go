// Package e2estandard tests the runtime in standard mode on real kube-apiservers
// (platform, onboarding, workload, one per ControlPlane), with the local platform
// granting ClusterRequests and AccessRequests for real, and the test provider of
// package widget. Each test has servers of its own (a standard-mode runtime serves every
// object of its onboarding cluster) and runs in parallel with the others: they mostly
// wait on the servers (docs/design/shared-test-servers.md).
package e2estandard
