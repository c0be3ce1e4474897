// Package e2estandard tests the runtime in standard mode on real kube-apiservers
// (platform, onboarding, workload, one per ControlPlane), with the local platform
// granting ClusterRequests and AccessRequests for real, and the test provider of
// package widget.
package e2estandard
