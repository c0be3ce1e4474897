package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A platform object wakes its tenant when its readiness or generation changes or it
// is deleted, not on its creation or on status churn (progress messages).
func TestReadinessChanged(t *testing.T) {
	release := func(gen, observed int64, ready, reason, message string, progress ...string) *unstructured.Unstructured {
		reconciling := message
		if len(progress) > 0 {
			reconciling = progress[0]
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
			"metadata": map[string]any{"name": "greeter", "namespace": "mcp--a", "generation": gen},
			"status": map[string]any{"observedGeneration": observed, "conditions": []any{
				map[string]any{"type": "Ready", "status": ready, "reason": reason, "message": message, "observedGeneration": observed},
				map[string]any{"type": "Reconciling", "status": "True", "reason": "Progressing", "message": reconciling},
			}},
		}}
		return u
	}
	withHistory := func(u *unstructured.Unstructured, version string) *unstructured.Unstructured {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"chartVersion": version}}, "status", "history")
		return u
	}
	p := readinessChanged{}
	installing := release(1, 1, "Unknown", "Progressing", "Running 'install' action")
	cases := []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{"another condition's message", installing, release(1, 1, "Unknown", "Progressing", "Running 'install' action", "waiting for the Deployment"), false},
		{"Ready's message: a new chart", release(1, 1, "True", "UpgradeSucceeded", "greeter@0.1.0"), release(1, 1, "True", "UpgradeSucceeded", "greeter@0.2.0"), true},
		{"Ready", installing, release(1, 1, "True", "InstallSucceeded", "Helm install succeeded"), true},
		{"a new generation", installing, release(2, 1, "Unknown", "Progressing", "Running 'install' action"), true},
		{"observed", release(2, 1, "True", "InstallSucceeded", ""), release(2, 2, "True", "InstallSucceeded", ""), true},
		{"the history, written after Ready", release(1, 1, "True", "UpgradeSucceeded", "done"), withHistory(release(1, 1, "True", "UpgradeSucceeded", "done"), "0.2.0"), true},
	}
	for _, c := range cases {
		if got := p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: wakes %v, want %v", c.name, got, c.want)
		}
	}
	if p.Create(event.CreateEvent{Object: installing}) {
		t.Error("its creation wakes the tenant")
	}
	if !p.Delete(event.DeleteEvent{Object: installing}) {
		t.Error("its deletion does not wake the tenant")
	}
}
