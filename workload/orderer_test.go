package workload_test

import (
	"context"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// TestOrderAfterAReleaseFinishedElsewhere: a tenant's release that this process started
// but did not see finish (another replica finished it, or the object was gone before
// the next attempt) must not stop the tenant's next object from ordering a workload
// cluster. The clusteraccess library remembers started deletions per tenant and refuses
// to create anything for it until one finishes in the same instance.
func TestOrderAfterAReleaseFinishedElsewhere(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	platform := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&clustersv1alpha1.ClusterRequest{}, &clustersv1alpha1.AccessRequest{}).Build()
	o := workload.NewOrderer(platform, workload.Options{ControllerName: "widgets", Scheme: scheme})
	id := cluster.KCPIdentity("tenantws")
	key := access.Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenantws"}}, Identity: id}
	clusterRequest := func() (*clustersv1alpha1.ClusterRequest, error) {
		list := &clustersv1alpha1.ClusterRequestList{}
		if err := platform.List(ctx, list, client.InNamespace(id.TenantNamespace())); err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, apierrors.NewNotFound(clustersv1alpha1.GroupVersion.WithResource("clusterrequests").GroupResource(), "")
		}
		return &list.Items[0], nil
	}

	if _, err := o.Ensure(ctx, key); err == nil {
		t.Fatal("Ensure returned an access before anything was granted")
	}
	cr, err := clusterRequest()
	if err != nil {
		t.Fatalf("no ClusterRequest ordered: %v", err)
	}
	// The platform holds the request with a finalizer of its own, so the release
	// starts but does not finish here.
	cr.Finalizers = append(cr.Finalizers, "platform.example/finalizer")
	if err := platform.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if done, err := o.Release(ctx, key); err != nil || done {
		t.Fatalf("Release: done %v, err %v; want it in progress", done, err)
	}
	// Finished elsewhere: the request is gone.
	if cr, err = clusterRequest(); err != nil {
		t.Fatal(err)
	}
	cr.Finalizers = nil
	if err := platform.Update(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := clusterRequest(); !apierrors.IsNotFound(err) {
		t.Fatalf("the released ClusterRequest is still there: %v", err)
	}

	// The tenant's next object orders again.
	if _, err := o.Ensure(ctx, key); err == nil {
		t.Fatal("Ensure returned an access before anything was granted")
	}
	if _, err := clusterRequest(); err != nil {
		t.Fatalf("no ClusterRequest ordered for the next object: %v", err)
	}
}
