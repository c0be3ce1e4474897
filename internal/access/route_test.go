package access

import (
	"context"
	"errors"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// TestRouteWaitsForTheGrantedCluster: a granted ClusterRequest whose Cluster the cache
// does not show yet (the grant's watch event came first, as in an e2e run under load)
// makes the tenant wait a second, not order an unrouted AccessRequest; once the Cluster
// and its profile are readable the request is created routed, and a route that stays
// unreadable for routedGrace is left to the library.
func TestRouteWaitsForTheGrantedCluster(t *testing.T) {
	ctx := context.Background()
	scheme, _ := workloadRegistration(t, "wl")
	reg := advanced.NewClusterRequest("workload", "wl", advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{Purpose: "workload"})).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{}).WithNamespaceGenerator(NamespaceFromIdentity).WithScheme(scheme).Build()
	clusterKey := types.NamespacedName{Namespace: "openmcp-system", Name: "workload-1"}
	tenant := func(name string) (Key, string, client.ObjectKey, *clustersv1alpha1.ClusterRequest) {
		key := Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}}, Identity: cluster.StandardIdentity("team", name)}
		ns, err := reg.Parameterize(key.Request, key.Identity).Namespace()
		if err != nil {
			t.Fatal(err)
		}
		cr := &clustersv1alpha1.ClusterRequest{}
		cr.Namespace, cr.Name = ns, "widgets--"+name+"--wl"
		cr.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
		cr.Status.Cluster = &commonapi.ObjectReference{Namespace: clusterKey.Namespace, Name: clusterKey.Name}
		return key, ns, client.ObjectKeyFromObject(cr), cr
	}
	early, earlyNS, earlyAR, earlyCR := tenant("early")
	late, lateNS, lateAR, lateCR := tenant("late")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(earlyCR, lateCR).Build()
	r := New(c, Options{ControllerName: "widgets", Registration: reg})
	if got := r.requestName(early, reg.Parameterize(early.Request, early.Identity)); got != earlyAR.Name {
		t.Fatalf("request name %q, the test assumes %q", got, earlyAR.Name)
	}
	route := func(key Key, ns string) error {
		return r.routeAccessRequest(ctx, key, reg.Parameterize(key.Request, key.Identity), ns)
	}
	arOf := func(k client.ObjectKey) (*clustersv1alpha1.AccessRequest, error) {
		ar := &clustersv1alpha1.AccessRequest{}
		return ar, c.Get(ctx, k, ar)
	}

	// The grant is visible, its Cluster is not.
	var waiting *WaitingError
	if err := route(early, earlyNS); !errors.As(err, &waiting) || waiting.RequeueAfter != time.Second {
		t.Fatalf("route with the Cluster not readable: %v, want a WaitingError to look again in 1s", err)
	}
	if _, err := arOf(earlyAR); !apierrors.IsNotFound(err) {
		t.Fatalf("AccessRequest before the Cluster is readable: %v, want none", err)
	}

	// The Cluster and its profile arrive: the request is created routed.
	cl := &clustersv1alpha1.Cluster{}
	cl.Namespace, cl.Name, cl.Spec.Profile = clusterKey.Namespace, clusterKey.Name, "local-workload"
	profile := &clustersv1alpha1.ClusterProfile{}
	profile.Name, profile.Spec.ProviderRef.Name = "local-workload", "local"
	for _, o := range []client.Object{cl, profile} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := route(early, earlyNS); !errors.As(err, &waiting) {
		t.Fatalf("route with the Cluster readable: %v, want a WaitingError after creating the request", err)
	}
	ar, err := arOf(earlyAR)
	if err != nil {
		t.Fatalf("routed AccessRequest: %v", err)
	}
	if ar.Spec.RequestRef != nil || ar.Spec.ClusterRef == nil || ar.Spec.ClusterRef.NamespacedName() != clusterKey ||
		ar.Labels[clustersv1alpha1.ProviderLabel] != "local" || ar.Labels[clustersv1alpha1.ProfileLabel] != "local-workload" {
		t.Errorf("AccessRequest spec %+v, labels %v; want routed to %s by provider local, profile local-workload", ar.Spec, ar.Labels, clusterKey)
	}
	if _, ok := r.unrouted[earlyAR]; ok {
		t.Errorf("the wait for %s is still remembered after the route", earlyAR)
	}

	// A route that stays unreadable past routedGrace is the library's to order.
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	r.unrouted[lateAR] = time.Now().Add(-routedGrace)
	if err := route(late, lateNS); err != nil {
		t.Fatalf("route unreadable for %s: %v, want nil (the library orders the request)", routedGrace, err)
	}
	if _, err := arOf(lateAR); !apierrors.IsNotFound(err) {
		t.Errorf("AccessRequest of the late tenant: %v, want none created by the route", err)
	}
	if _, ok := r.unrouted[lateAR]; ok {
		t.Errorf("the wait for %s is still remembered after giving up", lateAR)
	}
}
