package echo

import (
	"fmt"
	"path/filepath"
)

// Quickstart returns the tenant's commands `kcp-serviceprovider local` prints (and the
// README's quickstart repeats): kcp mode, standard mode, and a look at the workers.
// state is how the commands name the state folder ("$PWD/.local-platform" for the
// default); manifests are named relative to the repository root, where the commands run.
func Quickstart(state string) (kcp, standard, workers []string) {
	kubeconfigs := filepath.Join(state, "kubeconfigs")
	kcp = []string{
		fmt.Sprintf(`export PATH="%s:$PATH" KUBECONFIG="%s" KUBECACHEDIR="%s"`,
			filepath.Join(state, "bin"), filepath.Join(kubeconfigs, "kcp.kubeconfig"), filepath.Join(state, "kube-cache")),
		"kubectl --context root create -f examples/echo/config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f examples/echo/config/kcp/apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/echo",
		"kubectl --context tenant apply -f examples/echo/config/samples/echo_v1alpha1_echo.yaml",
		"kubectl --context tenant wait --for=condition=Ready echo/demo --timeout=2m",
	}
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f examples/echo/config/samples/echo_v1alpha1_echo.yaml`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready echo/demo --timeout=2m`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=echo-worker`, filepath.Join(kubeconfigs, "workload.kubeconfig")),
	}
	return kcp, standard, workers
}
