package app

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// QuickstartLines are the tenant's commands local prints (and the README's quickstart
// repeats): kcp mode, standard mode, and a look at the workers. state is how the
// commands name the state folder ("$PWD/.local-platform" for the default); manifests
// are named relative to the repository root, where the commands run.
func QuickstartLines(state string) (kcp, standard, workers []string) {
	kubeconfigs := filepath.Join(state, "kubeconfigs")
	kcp = []string{
		fmt.Sprintf(`export PATH="%s:$PATH" KUBECONFIG="%s" KUBECACHEDIR="%s"`,
			filepath.Join(state, "bin"), filepath.Join(kubeconfigs, "kcp.kubeconfig"), filepath.Join(state, "kube-cache")),
		"kubectl --context root create -f config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f config/kcp/echo-apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/echo",
		"kubectl --context tenant apply -f config/samples/echo_v1alpha1_echo.yaml",
		"kubectl --context tenant wait --for=condition=Ready echo/demo --timeout=2m",
	}
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f config/samples/echo_v1alpha1_echo.yaml`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready echo/demo --timeout=2m`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=echo-worker`, filepath.Join(kubeconfigs, "workload.kubeconfig")),
	}
	return kcp, standard, workers
}

// stateExpr is how the printed commands name the state folder: as the README does for
// the default, absolute otherwise.
func (l *localRun) stateExpr() string {
	if cwd, err := os.Getwd(); err == nil && l.state == filepath.Join(cwd, DefaultStateDir) {
		return "$PWD/" + DefaultStateDir
	}
	return l.state
}

func (l *localRun) printQuickstart() {
	kcp, standard, workers := QuickstartLines(l.stateExpr())
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nThe platform is up: the echo provider runs in standard and kcp mode (logs: %s).\n", filepath.Join(l.state, "logs"))
	fmt.Fprintf(&b, "\nAs a tenant in kcp (kubeconfig %s; contexts root, tenant, provider),\n", l.kcpKubeconfig)
	fmt.Fprintf(&b, "create a workspace, bind the echo export and request the service, from %s:\n\n", l.repo)
	for _, c := range kcp {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nAs a tenant in standard mode (kubeconfig %s; ControlPlane %s/%s is registered):\n\n",
		l.onboardingK, localControlPlaneNamespace, localControlPlaneName)
	for _, c := range standard {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nThe workers, on the workload cluster (kubeconfig %s):\n\n", l.workloadK)
	for _, c := range workers {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nPress Ctrl-C to stop every process.\n")
	_, _ = l.out.Write(b.Bytes())
}
