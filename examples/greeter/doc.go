// Package greeter is the reference provider that installs through Flux, the way most
// openMCP providers do: per tenant an OCIRepository and HelmReleases in the tenant's
// platform namespace, written with cluster.PlatformWriterFromCtx, whose kubeconfig
// Secrets the runtime keeps current (cluster.MCPSecretFromCtx,
// cluster.WorkloadSecretFromCtx). Flux's controllers on the platform cluster install
// the chart in chart/greeter on the tenant's end-user cluster and, in kcp mode, its
// controller on the workload cluster. README.md walks through it; cmd/greeter is its
// binary.
package greeter
