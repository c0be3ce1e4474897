package access

import (
	"context"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// TestNamespaceOfCachedRequestsIsNotCreated: a process that starts serving a tenant
// whose requests are already ordered (a restart, a replica taking over a dead one's
// workspaces) knows the tenant's platform namespace exists from the cached request
// and sends nothing for it; a tenant with no request yet has its namespace created,
// once.
func TestNamespaceOfCachedRequestsIsNotCreated(t *testing.T) {
	scheme, reg := workloadRegistration(t, "wl")
	key := func(name string) Key {
		return Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}}, Identity: cluster.StandardIdentity("team", name)}
	}
	served, fresh := key("served"), key("fresh")
	p := reg.Parameterize(served.Request, served.Identity)
	servedNS, err := p.Namespace()
	if err != nil {
		t.Fatal(err)
	}
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Namespace, ar.Name = servedNS, advanced.StableRequestName("widgets", served.Request, "wl")

	creates := map[string]int{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ar).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				creates[obj.GetName()]++
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	r := New(c, Options{ControllerName: "widgets", Registration: reg})

	for _, k := range []Key{served, fresh, served, fresh} {
		p := reg.Parameterize(k.Request, k.Identity)
		ns, err := p.Namespace()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ensureNamespace(context.Background(), k, p, ns); err != nil {
			t.Fatalf("ensureNamespace %s: %v", k.Request, err)
		}
		if !r.namespaces.knows(ns) {
			t.Errorf("namespace %s of %s not remembered", ns, k.Request)
		}
	}
	if creates[servedNS] != 0 {
		t.Errorf("namespace %s created %d times, want none: the tenant's AccessRequest stands in it", servedNS, creates[servedNS])
	}
	freshNS, _ := reg.Parameterize(fresh.Request, fresh.Identity).Namespace()
	if creates[freshNS] != 1 {
		t.Errorf("namespace %s created %d times, want once", freshNS, creates[freshNS])
	}
}

// TestRequestersShareTheNamespaceMemory: the requesters of one mode (the MCP's, the
// worker's, the workload cluster's) order in the same tenant namespace; with one
// memory, the first to create it spares the others their reads and creations.
func TestRequestersShareTheNamespaceMemory(t *testing.T) {
	scheme, reg := workloadRegistration(t, "wl")
	k := Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "a"}}, Identity: cluster.StandardIdentity("team", "a")}
	p := reg.Parameterize(k.Request, k.Identity)
	ns, err := p.Namespace()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				calls++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				calls++
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	shared := NewNamespaces()
	first := New(c, Options{ControllerName: "widgets", Registration: reg, Namespaces: shared})
	if err := first.ensureNamespace(context.Background(), k, p, ns); err != nil {
		t.Fatal(err)
	}
	before := calls
	second := New(c, Options{ControllerName: "widgets", Registration: reg, Namespaces: shared})
	if err := second.ensureNamespace(context.Background(), k, p, ns); err != nil {
		t.Fatal(err)
	}
	if calls != before {
		t.Errorf("the second requester sent %d namespace requests, want none: the first had created %s", calls-before, ns)
	}
	alone := New(c, Options{ControllerName: "widgets", Registration: reg})
	if err := alone.ensureNamespace(context.Background(), k, p, ns); err != nil {
		t.Fatal(err)
	}
	if calls == before {
		t.Errorf("a requester with a memory of its own sent no namespace request for %s", ns)
	}
}
