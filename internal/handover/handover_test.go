package handover

import (
	"context"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestHandover: while the provider's Deployment still runs a pod of the old template
// (the rolling update's surge), the gate holds reconciles and the old onboarding
// requests stay; once only pods of the new template run, the gate opens for good and
// the requests go, AccessRequests before their ClusterRequests.
func TestHandover(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	const ns, old = "openmcp-system", "velero.velero.services.openmcp.cloud--onboarding-run"
	rolling := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp-velero", Generation: 2},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rolling,
		&clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old}},
		&clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old}}).
		WithStatusSubresource(&appsv1.Deployment{}).Build()
	opts := Options{Client: c, Namespace: ns, Deployment: "sp-velero", Requests: []string{old}}
	gate := NewGate(opts)
	cleanup := New(gate)

	if held, why := gate.Held(ctx); !held || why == "" {
		t.Errorf("gate held=%v (%q) while an old pod runs, want held with a reason", held, why)
	}
	if done, _, err := gate.rolledOut(ctx); err != nil || done {
		t.Errorf("rolled out %v (%v) while an old pod runs", done, err)
	}

	rolling.Status.Replicas = 1
	if err := c.Status().Update(ctx, rolling); err != nil {
		t.Fatal(err)
	}
	gate.last = gate.last.Add(-gateRecheck) // the next look is due
	if held, why := gate.Held(ctx); held {
		t.Errorf("gate held (%q) after the rollout", why)
	}
	left, err := cleanup.Remove(ctx)
	if err != nil || left != 1 {
		t.Fatalf("first removal: %d left, %v; want the AccessRequest deleted and its ClusterRequest waiting", left, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, &clustersv1alpha1.ClusterRequest{}); err != nil {
		t.Errorf("ClusterRequest removed before its AccessRequest was gone: %v", err)
	}
	if left, err := cleanup.Remove(ctx); err != nil || left != 1 {
		t.Fatalf("second removal: %d left, %v", left, err)
	}
	if left, err := cleanup.Remove(ctx); err != nil || left != 0 {
		t.Fatalf("third look: %d left, %v", left, err)
	}
	for _, obj := range []client.Object{&clustersv1alpha1.AccessRequest{}, &clustersv1alpha1.ClusterRequest{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s: %v, want gone", obj, old, err)
		}
	}
	if New(NewGate(Options{})) != nil {
		t.Error("a Cleanup with nothing to remove")
	}
}
