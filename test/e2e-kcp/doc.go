// Package e2ekcp holds the end-to-end tests that run against a real kcp server: a
// provider workspace exporting a Service API, consumer workspaces binding it, and
// multicluster-runtime controllers reconciling the consumers' objects through the
// APIExport virtual workspace.
//
// The first test proves the machinery the runtime stands on (kcp, the apiexport
// cluster provider, multicluster-runtime) before any runtime code is involved: if it
// fails, later failures are about the environment, not the runtime.
//
// The tests need the binaries of hack/test-binaries.sh (see package testkit/harness).
package e2ekcp
