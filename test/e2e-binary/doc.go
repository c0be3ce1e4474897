// Package e2ebinary tests the kcp-serviceprovider binary as users and the
// openmcp-operator run it: built with `go build` and started as a subprocess, never
// called in-process.
//
// TestBinary is the acceptance test of the reference provider: init and run against a
// real kcp and real kube-apiservers (started by internal/harness), with the least platform
// RBAC of config/rbac, onboarding access requested from the local platform, and
// tenants applying the samples of examples/echo/config. It checks what a tenant, a platform
// operator and a security reviewer would: the Echo becomes Ready, the worker's
// kubeconfig reaches the tenant's workspace and reads its Echo and nothing else, and
// deleting the Echo removes the worker and revokes every credential the runtime created.
//
// TestOperatorDeploysProvider deploys the binary the platform's way: the ServiceProvider
// of config/deploy on the platform cluster, the real openmcp-operator rendering the init
// Job and run Deployment, the kubelet stand-in (internal/localenv) running them with the
// rendered args and env as the operator's ServiceAccounts, cluster-admin granting
// nothing so that config/rbac is all they have; a kcp and a standard tenant get their
// Echo and leave nothing behind. TestOperatorDeploysPlatformService does the same with
// the PlatformService of config/deploy/platformservice and an Echo on the platform
// cluster.
//
// TestScratchProvider builds internal/scaffold/template, a provider written from
// scratch on the command package (its types, provider.go and a main.go of at most 30
// lines), and serves a kcp tenant with its init and run. TestNewProvider makes a
// provider with cmd/kcp-serviceprovider-new in a folder outside the checkout, as a
// module of its own, and runs its vet, generate, end-to-end test, local platform and
// image there.
//
// TestLocal runs `kcp-serviceprovider-local local` and follows the README's quickstart word
// by word, then interrupts it and checks that no process and no file outside its state
// folder is left.
//
// The tests run in parallel (GOMAXPROCS of them at a time): each starts servers of its own
// (a platform, or the local command's), binds its probes and metrics to free ports and
// looks for leftover processes only by its own state folder. Most of their time is
// spent waiting on the operator, grants and rollouts, not computing.
package e2ebinary
