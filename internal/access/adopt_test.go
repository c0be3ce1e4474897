package access

import (
	"context"
	"maps"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// TestAdoptOldRequests: the requests a provider's binary on opencontrolplane-runtime
// ordered under its controller name ("Flux", capital F: the library lowercases it in
// request names only) and without the onboarding labels get those labels, so the
// library takes them as its own (same UIDs, nothing ordered twice) and their events
// find the tenant; a request of another controller ("flux", another case) is left
// alone, and the library's refusal stands. The workload registration ends in "cp"
// here, as metrics-operator's MCP requests do.
func TestAdoptOldRequests(t *testing.T) {
	scheme, reg := workloadRegistration(t, "cp")
	onboardingLabels := func(req reconcile.Request) map[string]string {
		return map[string]string{openmcpconst.OnboardingNameLabel: req.Name, openmcpconst.OnboardingNamespaceLabel: req.Namespace}
	}
	key := func(name string) Key {
		return Key{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}}, Identity: cluster.StandardIdentity("team", name)}
	}
	adopted, foreign := key("demo"), key("other")
	old := func(k Key, managedBy string) []client.Object {
		p := reg.Parameterize(k.Request, k.Identity)
		ns, err := p.Namespace()
		if err != nil {
			t.Fatal(err)
		}
		_, purpose, _ := advanced.DefaultManagedLabelGenerator("Flux", k.Request, p)
		labels := map[string]string{openmcpconst.ManagedByLabel: managedBy, openmcpconst.ManagedPurposeLabel: purpose}
		meta := metav1.ObjectMeta{Namespace: ns, Name: advanced.StableRequestName("Flux", k.Request, "cp"), Labels: labels, UID: types.UID(k.Request.Name)}
		return []client.Object{
			&clustersv1alpha1.AccessRequest{ObjectMeta: *meta.DeepCopy()},
			&clustersv1alpha1.ClusterRequest{ObjectMeta: *meta.DeepCopy()},
		}
	}
	objs := append(old(adopted, "Flux"), old(foreign, "flux")...)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	r := New(c, Options{ControllerName: "Flux", Registration: reg, Labels: onboardingLabels, Adopt: true})

	for _, k := range []Key{adopted, foreign} {
		p := reg.Parameterize(k.Request, k.Identity)
		ns, _ := p.Namespace()
		if err := r.adopt(context.Background(), k, p, ns); err != nil {
			t.Fatalf("adopt %s: %v", k.Request, err)
		}
	}
	for i, obj := range objs {
		got := obj.DeepCopyObject().(client.Object)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		if got.GetUID() != obj.GetUID() {
			t.Errorf("%T %s: UID %s, want %s kept", got, got.GetName(), got.GetUID(), obj.GetUID())
		}
		if i < 2 {
			want := maps.Clone(obj.GetLabels())
			maps.Copy(want, onboardingLabels(adopted.Request))
			if !maps.Equal(got.GetLabels(), want) {
				t.Errorf("%T %s labels %v, want %v: the old request adopted", got, got.GetName(), got.GetLabels(), want)
			}
			if got.GetName() != "flux--demo--cp" {
				t.Errorf("request name %q, want flux--demo--cp (lowercased, cp suffix)", got.GetName())
			}
			continue
		}
		if !maps.Equal(got.GetLabels(), obj.GetLabels()) {
			t.Errorf("%T %s of another controller relabelled: %v", got, got.GetName(), got.GetLabels())
		}
	}
	by := r.managedLabels(adopted, reg.Parameterize(adopted.Request, adopted.Identity))[openmcpconst.ManagedByLabel]
	if by != "Flux" {
		t.Errorf("managed-by %q, want Flux as declared", by)
	}
}

// workloadRegistration is a tenant's workload ClusterRequest and its AccessRequest,
// named with suffix, in the tenant's platform namespace; the scheme knows the
// openMCP cluster types and client-go's.
func workloadRegistration(t *testing.T, suffix string) (*runtime.Scheme, advanced.ClusterRegistration) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clustersv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reg := advanced.NewClusterRequest("workload", suffix, advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{Purpose: "workload"})).
		WithNamespaceGenerator(NamespaceFromIdentity).WithScheme(scheme).Build()
	return scheme, reg
}
