// Package e2ekcp holds the end-to-end tests that run against a real kcp server: a
// provider workspace exporting a Service API, consumer workspaces binding it, and
// multicluster-runtime controllers reconciling the consumers' objects through the
// APIExport virtual workspace.
//
// The first test proves the machinery the runtime stands on (kcp, the apiexport
// cluster provider, multicluster-runtime) before any runtime code is involved: if it
// fails, later failures are about the environment, not the runtime.
//
// Most tests share the package's platform (kcp of one or two shards, the platform and
// workload clusters, the openmcp-operator), started by the first of them: each serves
// a provider of its own name from a provider workspace of its own, its tenants in a
// workspace of the test's, and they run in parallel (replica processes too, told the
// provider's name). A test that restarts kcp (TestRuntimeKCPMode) or serves an
// onboarding cluster beside kcp (TestOperations) has a platform to itself.
// TestRuntimeKCPMode runs beside the others; the two tests that bound a failover by a
// time (TestOperations and TestReplicasShareWorkspaces) run one after the other, first,
// before the parallel ones start.
//
// The tests need the binaries of hack/test-binaries.sh (see package internal/harness).
package e2ekcp
