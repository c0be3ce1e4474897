package engine

import (
	"context"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// orphanProvider remembers what its Delete was called with.
type orphanProvider struct {
	recordingProvider
	result provider.Result
	got    *widget.Widget
	tenant *cluster.Tenant
}

func (p *orphanProvider) Delete(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	p.deleted++
	p.got, p.tenant = w, cluster.TenantFromCtx(ctx)
	return p.result, nil
}

// TestRecordIsStableAcrossStatusChanges: the record changes with what the tenant asked
// for, not with the status, so a status change costs no record write.
func TestRecordIsStableAcrossStatusChanges(t *testing.T) {
	w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main", UID: "u1", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Spec: widget.WidgetSpec{Color: "blue"}}
	first, err := recordOf("ws", w)
	if err != nil {
		t.Fatal(err)
	}
	w.ResourceVersion = "8"
	setReady(&w.Status.ServiceStatus, 1, metav1.ConditionTrue, v1alpha1.ReasonReady, "installed", v1alpha1.PhaseReady)
	w.Status.Resources = []v1alpha1.ManagedResource{{Cluster: "workload", APIVersion: "v1", Kind: "ConfigMap", Name: "widget"}}
	if again, err := recordOf("ws", w); err != nil || again != first {
		t.Errorf("record changed with the status or resourceVersion (err %v):\n%s\n%s", err, first, again)
	}
	w.Spec.Color = "red"
	if changed, _ := recordOf("ws", w); changed == first {
		t.Error("record did not change with the spec")
	}
}

// TestDeleteOrphan: the provider's Delete gets the recorded object, marked deleted, with
// the tenant's identity, mode and ProviderConfig and no end-user access; a Delete in
// progress is not done; a record on another tenant's request is not used.
func TestDeleteOrphan(t *testing.T) {
	prov := &orphanProvider{}
	e := New(testOptions(t, prov), widgetClusters(nil))

	rec, err := recordOf("ws", &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main", UID: "u1"}, Spec: widget.WidgetSpec{Color: "teal"}})
	if err != nil {
		t.Fatal(err)
	}
	ar := func(namespace string) []*clustersv1alpha1.AccessRequest {
		return []*clustersv1alpha1.AccessRequest{{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "widgets--ws--wl",
			Annotations: map[string]string{RecordAnnotation: rec}}}}
	}
	own := cluster.KCPIdentity("ws").TenantNamespace()

	if done, err := e.DeleteOrphan(context.Background(), ar("another-tenant")); err != nil || !done || prov.deleted != 0 {
		t.Fatalf("record on another tenant's request: done %v, err %v, Delete called %d times; want done without Delete", done, err, prov.deleted)
	}
	prov.result = provider.Pending("waiting for the worker to go", 0)
	if done, err := e.DeleteOrphan(context.Background(), ar(own)); err != nil || done {
		t.Fatalf("Delete in progress: done %v, err %v", done, err)
	}
	prov.result = provider.Done()
	if done, err := e.DeleteOrphan(context.Background(), ar(own)); err != nil || !done {
		t.Fatalf("Delete done: done %v, err %v", done, err)
	}
	if prov.got.Spec.Color != "teal" || prov.got.UID != "u1" || prov.got.DeletionTimestamp.IsZero() {
		t.Errorf("Delete got %+v, want the recorded object marked deleted", prov.got.ObjectMeta)
	}
	tn := prov.tenant
	if tn == nil || tn.Identity != cluster.KCPIdentity("ws") || tn.Mode != cluster.ModeKCP || tn.MCP != nil {
		t.Fatalf("Delete's tenant %+v", tn)
	}
	if d := tn.Deletion; d == nil || !d.Orphaned || d.EndUser != cluster.Gone || d.Workload != cluster.NotGranted {
		t.Errorf("Delete's deletion %+v, want orphaned, end-user cluster gone, workload not granted", d)
	}
	if got, ok := tn.ProviderConfig.(*widget.WidgetConfig); !ok || got.Spec.Greeting != "hello" {
		t.Errorf("Delete's ProviderConfig %+v", tn.ProviderConfig)
	}
	// Nothing recorded: only the revocation.
	if done, err := e.DeleteOrphan(context.Background(), []*clustersv1alpha1.AccessRequest{{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "x"}}}); err != nil || !done || prov.deleted != 2 {
		t.Errorf("no record: done %v, err %v, Delete called %d times, want 2", done, err, prov.deleted)
	}
}
