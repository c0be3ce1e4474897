package ownresources_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kcp-dev/logicalcluster/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/ownresources"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestGeneratedCRDOnAnAPIServer: the CRD controller-gen made of a type with its own
// status.resources beside the runtime's status is accepted by an API server (standard
// mode's onboarding cluster), and round-trips an object with both.
func TestGeneratedCRDOnAnAPIServer(t *testing.T) {
	crd := gizmoCRD(t)
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	s := harness.StartAPIServer(t, harness.PurposeOnboarding, harness.WithCRDs(crd, widgetCRD))
	c := harness.NewClient(t, s.Config, scheme(t))
	roundTrip(t, c)

	// A type without resources of its own keeps the runtime's as written.
	ctx := t.Context()
	w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "plain"}}
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.ManagedResource{{Cluster: "workload", APIVersion: "v1", Kind: "ConfigMap", Namespace: "widget", Name: "widget"}}
	w.Status.Resources = want
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatalf("writing the runtime's resources: %v", err)
	}
	got := &widget.Widget{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Status.Resources, want) {
		t.Errorf("the runtime's resources after a round trip: %+v, want %+v", got.Status.Resources, want)
	}
}

// TestGeneratedCRDInAKCPWorkspace: kcp mode serves the same CRD into a tenant's
// workspace through an APIExport, where it round-trips an object with both.
func TestGeneratedCRDInAKCPWorkspace(t *testing.T) {
	ctx := t.Context()
	crd := gizmoCRD(t)
	k := harness.StartKCP(t)
	root := logicalcluster.NewPath("root")
	provider, _ := k.CreateWorkspace(ctx, t, root, "gizmo-provider")
	tenant, _ := k.CreateWorkspace(ctx, t, root, "gizmo-tenant")
	surface, err := apiexport.FromCRD("gizmos", crd).APISurface()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiexport.Provision(ctx, k.ClientFor(t, provider), surface, apiexport.Options{}); err != nil {
		t.Fatalf("kcp refuses the export of the generated CRD: %v", err)
	}
	k.CreateAPIBinding(ctx, t, tenant, "gizmos", provider, "gizmos", nil)
	roundTrip(t, harness.NewClient(t, k.ConfigFor(tenant), scheme(t)))
}

func gizmoCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := ownresources.CRD()
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func scheme(t *testing.T) *runtime.Scheme {
	s := harness.Scheme()
	if err := ownresources.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// roundTrip writes a Gizmo with the runtime's status and resources of its own, reads
// it back unchanged, and sees the resources validated by the type's own shape.
func roundTrip(t *testing.T, c client.Client) {
	ctx := t.Context()
	g := &ownresources.Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}, Spec: ownresources.GizmoSpec{Version: "1.2.3"}}
	// A bound resource is served a moment after the binding says so.
	harness.Eventually(ctx, t, 30*time.Second, "creating a Gizmo", func(ctx context.Context) error {
		err := c.Create(ctx, g)
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			t.Fatalf("creating a Gizmo: %v", err)
		}
		return err
	})
	g.Status.ObservedGeneration = g.Generation
	g.Status.Phase = v1alpha1.PhaseReady
	g.Status.Identity = "tenant-a"
	meta.SetStatusCondition(&g.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Installed", Message: "all parts installed", ObservedGeneration: g.Generation})
	g.Status.Resources = []ownresources.InstalledObject{
		{Kind: "HelmRelease", Name: "gizmo", Phase: "Installed"},
		{Kind: "OCIRepository", Name: "gizmo", Phase: "Failed", Message: "pull failed"},
	}
	want := *g.Status.DeepCopy()
	if err := c.Status().Update(ctx, g); err != nil {
		t.Fatalf("writing both statuses: %v", err)
	}
	got := &ownresources.Gizmo{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(g), got); err != nil {
		t.Fatal(err)
	}
	// The API server keeps condition times to the second.
	for i := range want.Conditions {
		want.Conditions[i].LastTransitionTime = got.Status.Conditions[i].LastTransitionTime
	}
	if !equality.Semantic.DeepEqual(got.Status, want) {
		t.Errorf("status after a round trip differs (-want +got):\n%s", cmp.Diff(want, got.Status))
	}

	// The items are the type's own: a phase it does not know is refused.
	got.Status.Resources = append(got.Status.Resources, ownresources.InstalledObject{Kind: "Secret", Name: "values", Phase: "Copied"})
	if err := c.Status().Update(ctx, got); !apierrors.IsInvalid(err) {
		t.Errorf("a resource of a phase the type does not know: %v, want Invalid", err)
	}
}
