package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openmcp-project/kcp-serviceprovider/command"
)

// stateExpr is how the printed commands name the state folder: as the README does for
// the default, absolute otherwise.
func (l *localRun) stateExpr() command.LocalState {
	if cwd, err := os.Getwd(); err == nil && l.state == filepath.Join(cwd, DefaultStateDir) {
		return command.LocalState("$PWD/" + DefaultStateDir)
	}
	return command.LocalState(l.state)
}

func (l *localRun) printQuickstart() {
	name := l.opts.provider.Name
	kcp, standard, workers := l.opts.provider.Local.Quickstart(l.stateExpr())
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nThe platform is up: the %s provider runs in standard and kcp mode (logs: %s).\n", name, filepath.Join(l.state, "logs"))
	fmt.Fprintf(&b, "\nAs a tenant in kcp (kubeconfig %s; contexts root, tenant, provider),\n", l.kcpKubeconfig)
	fmt.Fprintf(&b, "create a workspace, bind the %s export and request the service, from %s:\n\n", name, l.repo)
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
