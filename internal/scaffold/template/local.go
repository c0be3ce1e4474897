package main

import (
	"fmt"

	"github.com/openmcp-project/kcp-serviceprovider/command"
)

// quickstart is what `local` prints once its platform is up: a tenant's commands in kcp
// mode and in standard mode, and a look at the workload cluster. They run from this
// module's root.
func quickstart(state command.LocalState) (kcp, standard, workload []string) {
	kcp = []string{
		state.Shell(),
		"kubectl --context root create -f config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f config/apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/" + providerName,
		"kubectl --context tenant apply -f config/samples/note.yaml",
		"kubectl --context tenant wait --for=condition=Ready note/demo --timeout=3m",
	}
	onboarding := state.Kubeconfig("onboarding")
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f config/samples/note.yaml`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready note/demo --timeout=3m`, onboarding),
	}
	workload = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get configmaps -A --field-selector metadata.name=%s`, state.Kubeconfig("workload"), ConfigMapName),
	}
	return kcp, standard, workload
}
