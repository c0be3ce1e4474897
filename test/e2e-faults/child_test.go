package e2efaults

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
)

// runtimeChildEnv names the folder holding the kubeconfigs of a runtime child.
const runtimeChildEnv = "KSP_RELIABILITY_RUNTIME_DIR"

// startRuntimeProcess runs the widget runtime in a process of its own (this test
// binary again, see TestRuntimeChild), so that the test can SIGKILL it: no deferred
// call, no context cancellation, no flush; what a crashed or OOM-killed pod leaves.
func (e *env) startRuntimeProcess(t *testing.T) *harness.Process {
	t.Helper()
	dir := t.TempDir()
	for name, kcfg := range map[string][]byte{"platform": e.platform.Kubeconfig(), "onboarding": e.onboarding.Kubeconfig()} {
		if err := os.WriteFile(filepath.Join(dir, name+".kubeconfig"), kcfg, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return harness.StartTestChild(t, "TestRuntimeChild", runtimeChildEnv+"="+dir)
}

// TestRuntimeChild is the runtime process of startRuntimeProcess; it runs until killed.
func TestRuntimeChild(t *testing.T) {
	dir := os.Getenv(runtimeChildEnv)
	if dir == "" {
		t.Skip("runs only as a child of a reliability test")
	}
	log.SetLogger(zap.New(zap.UseDevMode(true)))
	platform, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "platform.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	onboarding, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "onboarding.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	o := withTestDefaults(builder.Options{Platform: platform, Onboarding: onboarding})
	if err := newRuntime(t).Start(ctx, o); err != nil {
		t.Fatal(err)
	}
}
