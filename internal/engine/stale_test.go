package engine

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

const testFinalizer = "widgets.services.open-control-plane.io/finalizer"

// staleCluster serves reads from a cache that still holds an object the API server no
// longer has, as an informer does until the watch delivers the deletion.
type staleCluster struct {
	ctrlcluster.Cluster
	cache, server ctrlclient.Client
}

func (c *staleCluster) GetClient() ctrlclient.Client    { return c.cache }
func (c *staleCluster) GetAPIReader() ctrlclient.Reader { return c.server }

// recordingTenancy counts what the engine releases.
type recordingTenancy struct{ released int }

func (*recordingTenancy) Mode() cluster.Mode { return cluster.ModeKCP }
func (*recordingTenancy) Target(name string, cl ctrlcluster.Cluster, obj *widget.Widget) Target[*widget.Widget] {
	id := cluster.KCPIdentity(name)
	return Target[*widget.Widget]{ClusterName: name, Cluster: cl, Object: obj, Identity: id,
		Key: access.Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, Identity: id}}
}
func (*recordingTenancy) Admit(context.Context, Target[*widget.Widget]) error { return nil }
func (*recordingTenancy) EndUser(context.Context, Target[*widget.Widget]) (*cluster.Access, error) {
	return &cluster.Access{}, nil
}
func (*recordingTenancy) LookupEndUser(context.Context, Target[*widget.Widget]) (*cluster.Access, error) {
	return &cluster.Access{}, nil
}
func (r *recordingTenancy) ReleaseEndUser(context.Context, Target[*widget.Widget]) (bool, error) {
	r.released++
	return true, nil
}
func (*recordingTenancy) RequestsFor(context.Context, map[string]string, ClusterLister) []mcreconcile.Request {
	return nil
}

// recordingWorkload counts releases; the first pendingFor of them are not done yet.
type recordingWorkload struct{ released, pendingFor int }

func (*recordingWorkload) Ensure(context.Context, access.Key) (*cluster.Access, error) {
	return &cluster.Access{}, nil
}
func (*recordingWorkload) Lookup(context.Context, access.Key) (*cluster.Access, error) {
	return nil, nil
}
func (w *recordingWorkload) Release(context.Context, access.Key) (bool, error) {
	w.released++
	return w.released > w.pendingFor, nil
}

type recordingProvider struct{ deleted int }

func (*recordingProvider) CreateOrUpdate(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Result{}, nil
}
func (p *recordingProvider) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	p.deleted++
	return provider.Result{}, nil
}

// TestStaleDeletionReleasesNothing: a reconcile of an object whose release already
// finished, but which the cache still shows with our finalizer, must not release the
// tenant's accesses again: by then they may belong to the workspace's next object.
func TestStaleDeletionReleasesNothing(t *testing.T) {
	scheme := widgetScheme(t)
	deleting := func(uid types.UID) *widget.Widget {
		return &widget.Widget{ObjectMeta: metav1.ObjectMeta{
			Name: "w", Namespace: "default", UID: uid, Finalizers: []string{testFinalizer},
			DeletionTimestamp: &metav1.Time{Time: time.Now()},
		}}
	}

	cases := []struct {
		name        string
		server      []ctrlclient.Object
		wantRelease int
	}{
		{name: "gone from the server", wantRelease: 0},
		// A recreated object of the same name is a different tenant object.
		{name: "recreated under the same name", server: []ctrlclient.Object{&widget.Widget{ObjectMeta: metav1.ObjectMeta{
			Name: "w", Namespace: "default", UID: "new", Finalizers: []string{testFinalizer}}}}, wantRelease: 0},
		{name: "still held on the server", server: []ctrlclient.Object{deleting("old")}, wantRelease: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := &staleCluster{
				cache:  fake.NewClientBuilder().WithScheme(scheme).WithObjects(deleting("old")).WithStatusSubresource(&widget.Widget{}).Build(),
				server: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.server...).Build(),
			}
			clusters := newClusterSet(func() ctrlclient.ObjectList { return &widget.WidgetList{} }, nil)
			clusters.clusters["ws"] = &engagedCluster{cl: cl, ctx: t.Context()}
			ten, wl, prov := &recordingTenancy{}, &recordingWorkload{}, &recordingProvider{}
			opts := testOptions(t, prov)
			opts.Tenancy, opts.Workload = ten, wl
			opts.LiveReader = func(c ctrlcluster.Cluster) (ctrlclient.Reader, error) { return c.GetAPIReader(), nil }
			e := New(opts, clusters)
			req := mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}}}
			if _, err := e.Reconcile(context.Background(), req); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if prov.deleted != tc.wantRelease || wl.released != tc.wantRelease || ten.released != tc.wantRelease {
				t.Fatalf("provider Delete %d, workload releases %d, end-user releases %d; want %d each",
					prov.deleted, wl.released, ten.released, tc.wantRelease)
			}
		})
	}
}

// TestReleaseDoesNotAskTheProviderAgain: once the provider's Delete has finished, the
// reconciles that wait for the workload cluster's release do not call it again (it
// would be handed accesses the platform is revoking), the worker's own credential is
// revoked once, as soon as the provider is done, and the engine forgets the object
// once its finalizer is gone.
func TestReleaseDoesNotAskTheProviderAgain(t *testing.T) {
	scheme := widgetScheme(t)
	obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1",
		Finalizers: []string{testFinalizer}, DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).WithStatusSubresource(&widget.Widget{}).Build()
	ten, wl, prov := &workerTenancy{}, &recordingWorkload{pendingFor: 2}, &recordingProvider{}
	opts := testOptions(t, prov)
	opts.Tenancy, opts.Workload = ten, wl
	opts.LiveReader = func(c ctrlcluster.Cluster) (ctrlclient.Reader, error) { return c.GetAPIReader(), nil }
	e := New(opts, widgetClusters(server))
	req := mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}}}
	for i := range 3 {
		if _, err := e.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconcile %d: %v", i+1, err)
		}
		// The worker is gone with the provider's Delete: its credential is revoked in
		// that reconcile, not after the workload cluster's release.
		if i == 0 && (ten.revoked != 1 || ten.released != 0) {
			t.Errorf("after the provider's Delete: worker revocations %d, end-user releases %d; want 1 and 0", ten.revoked, ten.released)
		}
	}
	if prov.deleted != 1 || wl.released != 3 || ten.released != 1 || ten.revoked != 1 {
		t.Errorf("provider Delete %d, workload releases %d, end-user releases %d, worker revocations %d; want 1, 3 (two not done yet), 1 and 1",
			prov.deleted, wl.released, ten.released, ten.revoked)
	}
	if _, ok := e.removed.get(obj.UID); ok {
		t.Error("the engine still remembers the object after removing its finalizer")
	}
}
