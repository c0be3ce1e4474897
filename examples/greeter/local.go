package greeter

import (
	"fmt"
	"path/filepath"
)

// Quickstart returns the tenant's commands `greeter local` prints: kcp mode, standard
// mode, and a look at the chart's controllers on the workload cluster.
func Quickstart(state string) (kcp, standard, workers []string) {
	kubeconfigs := filepath.Join(state, "kubeconfigs")
	kcp = []string{
		fmt.Sprintf(`export PATH="%s:$PATH" KUBECONFIG="%s" KUBECACHEDIR="%s"`,
			filepath.Join(state, "bin"), filepath.Join(kubeconfigs, "kcp.kubeconfig"), filepath.Join(state, "kube-cache")),
		"kubectl --context root create -f examples/greeter/config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f examples/greeter/config/apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/greeter",
		"kubectl --context tenant apply -f examples/greeter/config/samples/greeter.yaml",
		"kubectl --context tenant wait --for=condition=Ready greeter/demo --timeout=3m",
		"kubectl --context tenant get configmap -n greeter-system greeter -o yaml",
	}
	onboarding := filepath.Join(kubeconfigs, "onboarding.kubeconfig")
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f examples/greeter/config/samples/greeter.yaml`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready greeter/demo --timeout=3m`, onboarding),
		fmt.Sprintf(`kubectl --kubeconfig "%s" get helmreleases,ocirepositories -A`, filepath.Join(kubeconfigs, "platform.kubeconfig")),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=greeter`, filepath.Join(kubeconfigs, "workload.kubeconfig")),
	}
	return kcp, standard, workers
}
