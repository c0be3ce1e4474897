// Package localenv starts, on this machine, the servers of a local openMCP platform:
// a kcp server (embedded etcd) and plain Kubernetes API servers (etcd and
// kube-apiserver through controller-runtime's envtest), plus helper processes such as
// the provider binary itself. It backs `kcp-serviceprovider local`.
//
// Why not test/harness: the harness ties every server to a *testing.T (cleanup,
// failure output), which a command cannot supply. This package starts the same
// binaries (found through KSP_TEST_ASSETS, or built by hack/test-binaries.sh) with the
// same safety rules, but reports errors and leaves cleanup to the caller's Stop.
//
// Rules it keeps:
//   - Every file goes into one state folder the caller names: kcp's root directory,
//     etcd data, certificates, logs, kubeconfigs, and (through TMPDIR, which the caller
//     points there) envtest's temporary files. Nothing is written elsewhere.
//   - No process outlives the command. Each server is started in its own process group
//     (so a Ctrl-C in the terminal reaches only the command, which then stops the
//     servers in order) from one goroutine whose OS thread stays locked for the
//     command's lifetime, with the kernel's parent-death signal set to SIGKILL: if the
//     command dies without stopping them, the kernel kills them. envtest forks etcd and
//     kube-apiserver itself, so it gets wrapper scripts that set the same signal through
//     setpriv(1) before executing the real binaries.
//   - Stop stops everything in the reverse order of starting, asking each process
//     group to terminate before killing it.
package localenv
