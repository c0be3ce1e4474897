package workload_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
	scheme := testScheme(t)
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

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// TestGrantedAccessIsRoutedAndRemembered follows one tenant through the grant as the
// real platform gives it, and checks the two things the runtime relies on:
//   - the AccessRequest is created routed, naming the Cluster the ClusterRequest was
//     granted and labelled with its profile and provider, so that openMCP's
//     access-request controller has nothing to resolve;
//   - once granted, a poll of the tenant (another Ensure with nothing changed) reads
//     only the two requests, which the runtime's platform client serves from its
//     informer cache: not the access Secret, not the tenant's namespace. A change to
//     the grant ends that at once; a write that leaves the grant as it was does not.
//
// It also checks that the namespace is created without a read, and that a record
// kept before the AccessRequest existed is written with its create.
func TestGrantedAccessIsRoutedAndRemembered(t *testing.T) {
	ctx := context.Background()
	scheme := testScheme(t)
	var mu sync.Mutex
	gets := map[string]int{}
	platform := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&clustersv1alpha1.ClusterRequest{}, &clustersv1alpha1.AccessRequest{}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			gets[fmt.Sprintf("%T", obj)]++
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	countGets := func(f func()) map[string]int {
		mu.Lock()
		clear(gets)
		mu.Unlock()
		f()
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(gets)
	}
	o := workload.NewOrderer(platform, workload.Options{ControllerName: "widgets", Scheme: scheme})
	id := cluster.KCPIdentity("tenantws")
	key := access.Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenantws"}}, Identity: id}
	ns := id.TenantNamespace()

	// The ClusterRequest is ordered first; the scheduler grants it on a shared Cluster.
	// The tenant's platform namespace is created, not read: later passes know it
	// exists.
	first := countGets(func() {
		if _, err := o.Ensure(ctx, key); err == nil {
			t.Fatal("Ensure returned an access before anything was granted")
		}
	})
	if n := first["*v1.Namespace"]; n != 0 {
		t.Errorf("the first Ensure read the tenant namespace %d times, want 0 (it creates it)", n)
	}
	if err := platform.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		t.Errorf("the tenant namespace %s was not created: %v", ns, err)
	}
	// The engine records the object before the workload access is ordered; without an
	// AccessRequest yet, the record waits for its create.
	if err := o.Record(ctx, key, "example.com/record", "v0"); err != nil {
		t.Fatal(err)
	}
	crs := &clustersv1alpha1.ClusterRequestList{}
	if err := platform.List(ctx, crs, client.InNamespace(ns)); err != nil || len(crs.Items) != 1 {
		t.Fatalf("want one ClusterRequest in %s, got %d (%v)", ns, len(crs.Items), err)
	}
	cr := &crs.Items[0]
	for _, obj := range []client.Object{
		&clustersv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "local-workload"},
			Spec: clustersv1alpha1.ClusterProfileSpec{ProviderRef: commonapi.LocalObjectReference{Name: "localplatform"}}},
		&clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "openmcp-system", Name: "workload"},
			Spec: clustersv1alpha1.ClusterSpec{Profile: "local-workload"}},
	} {
		if err := platform.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cr.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	cr.Status.Cluster = &commonapi.ObjectReference{Namespace: "openmcp-system", Name: "workload"}
	if err := platform.Status().Update(ctx, cr); err != nil {
		t.Fatal(err)
	}

	// The AccessRequest comes routed.
	routed := countGets(func() {
		if _, err := o.Ensure(ctx, key); err == nil {
			t.Fatal("Ensure returned an access before the AccessRequest was granted")
		}
	})
	if n := routed["*v1.Namespace"]; n != 0 {
		t.Errorf("a later pass read the tenant namespace %d times, want 0", n)
	}
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := platform.List(ctx, ars, client.InNamespace(ns)); err != nil || len(ars.Items) != 1 {
		t.Fatalf("want one AccessRequest in %s, got %d (%v)", ns, len(ars.Items), err)
	}
	ar := &ars.Items[0]
	if ar.Spec.RequestRef != nil || ar.Spec.ClusterRef == nil || *ar.Spec.ClusterRef != *cr.Status.Cluster {
		t.Errorf("AccessRequest requestRef %+v, clusterRef %+v; want only the granted Cluster %+v", ar.Spec.RequestRef, ar.Spec.ClusterRef, cr.Status.Cluster)
	}
	if ar.Labels[clustersv1alpha1.ProviderLabel] != "localplatform" || ar.Labels[clustersv1alpha1.ProfileLabel] != "local-workload" {
		t.Errorf("AccessRequest labels %v; want the provider and profile of the Cluster", ar.Labels)
	}
	if ar.Spec.Token == nil {
		t.Error("AccessRequest asks for no token")
	}
	if got := ar.Annotations["example.com/record"]; got != "v0" {
		t.Errorf("AccessRequest created with record %q, want the one kept before it existed (v0)", got)
	}

	// The cluster provider grants it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ar.Name}, Data: map[string][]byte{
		clustersv1alpha1.SecretKeyKubeconfig:          []byte(testKubeconfig),
		clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(fmt.Sprint(time.Now().Unix())),
		clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(fmt.Sprint(time.Now().Add(30 * 24 * time.Hour).Unix())),
	}}
	if err := platform.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ar.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	ar.Status.ObservedGeneration = ar.Generation
	ar.Status.SecretRef = &commonapi.LocalObjectReference{Name: secret.Name}
	if err := platform.Status().Update(ctx, ar); err != nil {
		t.Fatal(err)
	}
	var granted *cluster.Access
	full := countGets(func() {
		var err error
		if granted, err = o.Ensure(ctx, key); err != nil {
			t.Fatalf("Ensure after the grant: %v", err)
		}
	})
	if full["*v1.Secret"] != 1 || full["*v1.Namespace"] != 0 {
		t.Errorf("the first Ensure after the grant read the access Secret %d times and the namespace %d times, want 1 and 0 (reads: %v)",
			full["*v1.Secret"], full["*v1.Namespace"], full)
	}

	// pollRemembered polls the tenant (an Ensure that must answer with the remembered
	// access) and returns what the poll read, by type.
	pollRemembered := func(what string) map[string]int {
		t.Helper()
		return countGets(func() {
			if a, err := o.Ensure(ctx, key); err != nil || a != granted {
				t.Fatalf("%s returned %p, %v; want the remembered access %p", what, a, err, granted)
			}
		})
	}

	// A poll: nothing changed.
	poll := pollRemembered("a poll")
	for kind, n := range poll {
		if kind != "*v1alpha1.AccessRequest" && kind != "*v1alpha1.ClusterRequest" {
			t.Errorf("a poll read %s %d times; want only the requests (reads: %v)", kind, n, poll)
		}
	}

	// The engine keeps its record on the request (Record): that changes the request,
	// but not the access, so the next poll still reads no Secret.
	if err := o.Record(ctx, key, "example.com/record", "v1"); err != nil {
		t.Fatal(err)
	}
	if n := pollRemembered("a poll after Record")["*v1.Secret"]; n != 0 {
		t.Errorf("a poll after the runtime's own Record read the access Secret %d times, want 0", n)
	}

	// The platform writes the request's status again without changing the grant (a
	// condition of its own): the next poll still reads no Secret.
	if err := platform.Get(ctx, client.ObjectKeyFromObject(ar), ar); err != nil {
		t.Fatal(err)
	}
	ar.Status.Conditions = append(ar.Status.Conditions, metav1.Condition{Type: "Checked", Status: metav1.ConditionTrue,
		Reason: "Checked", LastTransitionTime: metav1.Now()})
	if err := platform.Status().Update(ctx, ar); err != nil {
		t.Fatal(err)
	}
	if n := pollRemembered("a poll after the platform's status write")["*v1.Secret"]; n != 0 {
		t.Errorf("a poll after a status write that left the grant as it was read the access Secret %d times, want 0", n)
	}

	// The grant changes (here: the platform names a new Secret): the next Ensure takes
	// the full pass and reads it.
	renewed := secret.DeepCopy()
	renewed.Name, renewed.ResourceVersion = ar.Name+"-2", ""
	if err := platform.Create(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	ar.Status.SecretRef = &commonapi.LocalObjectReference{Name: renewed.Name}
	if err := platform.Status().Update(ctx, ar); err != nil {
		t.Fatal(err)
	}
	again := countGets(func() {
		if _, err := o.Ensure(ctx, key); err != nil {
			t.Fatalf("Ensure after the grant changed: %v", err)
		}
	})
	if again["*v1.Secret"] != 1 {
		t.Errorf("after the grant changed, Ensure read the Secret %d times, want 1 (reads: %v)", again["*v1.Secret"], again)
	}
}

// testKubeconfig parses; nothing connects to it.
const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: workload
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: workload
  context:
    cluster: workload
    user: tenant
current-context: workload
users:
- name: tenant
  user:
    token: not-a-real-token
`
