// Package localenv is the only code of this project that starts servers on this
// machine: a kcp server (embedded etcd), plain Kubernetes API servers (etcd and
// kube-apiserver through controller-runtime's envtest), helper processes such as the
// provider binary, and TCP proxies. On top of them it assembles one local openMCP
// platform ([Env.StartPlatform]): API servers standing in for the platform,
// onboarding, workload and MCP clusters, the real openmcp-operator ([Env.StartOperator])
// scheduling ClusterRequests and routing AccessRequests, the local platform playing
// the cluster provider that grants access to the API servers, ControlPlanes, and a kcp
// provider workspace with the runtime's identity.
// The deployment controller (OperatorOptions.Controllers) renders a provider's init
// Job and run Deployment; [Env.StartKubelet] stands in for the kubelet the bare API
// server lacks and runs their pods as processes, as the pods' ServiceAccounts.
//
// `kcp-serviceprovider local`, the benchmark and (through testkit/harness, which adds
// t.Cleanup and t.Fatal) every integration and end-to-end test use it. Like envtest's
// Environment.Start it reports errors and leaves cleanup to the caller's [Env.Stop].
//
// Rules it keeps:
//   - Every file of an [Env] goes into one folder the caller names: kcp's root
//     directory, etcd data, certificates, logs, kubeconfigs. Tests take theirs from
//     [ScratchDir], a per-process folder under $TMPDIR that [SweepStaleRunDirs]
//     removes once its process is gone.
//   - No process outlives its starter. Each one is started in its own process group
//     (so a Ctrl-C in the terminal reaches only the starter, which then stops them in
//     order) from a goroutine whose OS thread stays locked as long as they run, with
//     the kernel's parent-death signal set to SIGKILL (Linux): if the starter dies
//     without stopping them, the kernel kills them. envtest forks etcd and
//     kube-apiserver itself, so it gets wrapper scripts that set the same signal
//     through setpriv(1) before executing the real binaries.
//   - Stop stops everything in the reverse order of starting, asking each process
//     group to terminate before killing it.
//
// The binaries come from the folder named by KSP_TEST_ASSETS (see [AssetsDir]), or
// hack/test-binaries.sh builds them (see [FindAssets]).
package localenv
