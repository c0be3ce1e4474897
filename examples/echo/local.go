package echo

import (
	"fmt"

	"github.com/openmcp-project/kcp-serviceprovider/command"
)

// Quickstart returns the tenant's commands `kcp-serviceprovider local` prints (and the
// README's quickstart repeats): kcp mode, standard mode, and a look at the workers.
// state is how the commands name the state folder ("$PWD/.local-platform" for the
// default); manifests are named relative to the repository root, where the commands run.
func Quickstart(state command.LocalState) (kcp, standard, workers []string) {
	kcp = []string{
		state.Shell(),
		"kubectl --context root create -f examples/echo/config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f examples/echo/config/kcp/apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/echo",
		"kubectl --context tenant apply -f examples/echo/config/samples/echo_v1alpha1_echo.yaml",
		"kubectl --context tenant wait --for=condition=Ready echo/demo --timeout=2m",
	}
	onboarding := state.Kubeconfig("onboarding")
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f examples/echo/config/samples/echo_v1alpha1_echo.yaml`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready echo/demo --timeout=2m`, onboarding),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=echo-worker`, state.Kubeconfig("workload")),
	}
	return kcp, standard, workers
}
