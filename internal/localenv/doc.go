// Package localenv is the only code of this project that starts servers on this
// machine: a kcp server (embedded etcd), plain Kubernetes API servers (etcd and
// kube-apiserver through controller-runtime's envtest), helper processes such as the
// provider binary, and TCP proxies. On top of them it assembles one local openMCP
// platform ([Env.StartPlatform]): API servers standing in for the platform,
// onboarding, workload and MCP clusters, the real openmcp-operator ([Env.StartOperator])
// scheduling ClusterRequests and routing AccessRequests, the local platform playing
// the cluster provider that grants access to the API servers, ControlPlanes, and a kcp
// provider workspace with the runtime's identity. With PlatformOptions.MCPClusters
// several MCP API servers form one pool of the local platform's targets behind the
// MCP ClusterProfile, so that ControlPlanes have servers of their own.
// The deployment controller (OperatorOptions.Controllers) renders a provider's init
// Job and run Deployment; [Env.StartKubelet] stands in for the kubelet the bare API
// server lacks and runs their pods as processes, as the pods' ServiceAccounts.
// On request (PlatformOptions.Flux) an OCI registry ([Env.StartRegistry]), to which
// [Registry.PushChart] pushes charts with the real helm CLI, and Flux's
// source-controller and helm-controller ([Env.StartFlux]) run on the platform
// cluster and install HelmReleases into the clusters their kubeconfigs name.
//
// The local command (command/local), the benchmark and (through testkit/harness, which adds
// t.Cleanup and t.Fatal) every integration and end-to-end test use it. Like envtest's
// Environment.Start it reports errors and leaves cleanup to the caller's [Env.Stop].
//
// It keeps every file of an Env in one folder the caller names, lets no process
// outlive its starter (process groups, the parent-death signal), and stops everything
// in reverse order: docs/design/layout.md, "One local environment".
//
// The binaries come from the folder named by KSP_TEST_ASSETS (see [AssetsDir]), or
// hack/test-binaries.sh builds them (see [FindAssets]).
package localenv
