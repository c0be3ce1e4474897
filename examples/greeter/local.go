package greeter

import (
	"fmt"

	"github.com/openmcp-project/kcp-serviceprovider/command"
)

// Quickstart returns the tenant's commands `greeter local` prints: kcp mode, standard
// mode, and a look at the chart's controllers on the workload cluster.
func Quickstart(state command.LocalState) (kcp, standard, workers []string) {
	kcp = []string{
		state.Shell(),
		"kubectl --context root create -f examples/greeter/config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f examples/greeter/config/apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/greeter",
		"kubectl --context tenant apply -f examples/greeter/config/samples/greeter.yaml",
		"kubectl --context tenant wait --for=condition=Ready greeter/demo --timeout=3m",
		"kubectl --context tenant get configmap -n greeter-system greeter -o yaml",
	}
	onboarding := state.Kubeconfig("onboarding")
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f examples/greeter/config/samples/greeter.yaml`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready greeter/demo --timeout=3m`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" get helmreleases,ocirepositories -A`, state.Kubeconfig("platform")),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=greeter`, state.Kubeconfig("workload")),
	}
	return kcp, standard, workers
}
