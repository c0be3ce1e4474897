// Package localenv is the only code of this project that starts servers on this
// machine: kcp, plain Kubernetes API servers (etcd and kube-apiserver through
// controller-runtime's envtest), helper processes and TCP proxies. On top of them
// [Env.StartPlatform] assembles one local openMCP platform: API servers for the
// platform, onboarding, workload and MCP clusters (several MCP servers with
// PlatformOptions.MCPClusters), the real openmcp-operator ([Env.StartOperator]), the
// local platform as the cluster provider, ControlPlanes, a kcp provider workspace with
// the runtime's identity, and on request a kubelet stand-in ([Env.StartKubelet]) and an
// OCI registry with Flux's source-controller and helm-controller ([Env.StartRegistry],
// [Env.StartFlux]).
//
// command/local, the benchmark and, through internal/harness, every end-to-end test use
// it. Like envtest it reports errors and leaves cleanup to [Env.Stop]. It keeps every
// file of an Env in one folder, lets no process outlive its starter, and stops in
// reverse order (docs/design/layout.md, "One local environment"; the platform's parts:
// docs/design/local-platform.md and docs/design/flux-providers.md). The binaries come
// from KSP_TEST_ASSETS ([AssetsDir]) or hack/test-binaries.sh ([FindAssets]).
package localenv
