package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/migration"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// veleroLike is a Service type as velero's, flux's and metrics-operator's are on
// opencontrolplane-runtime: a status.resources of their own shape (a reference with a
// phase and a message), which the runtime's ServiceStatus.resources must not clobber.
type veleroLike struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            veleroStatus `json:"status,omitempty"`
}

type veleroStatus struct {
	v1alpha1.ServiceStatus `json:",inline"`
	// Resources shadows ServiceStatus.Resources: encoding/json and the unstructured
	// converter take the shallower field.
	Resources []veleroResource `json:"resources,omitempty"`
}

type veleroResource struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}

func (o *veleroLike) GetServiceStatus() *v1alpha1.ServiceStatus { return &o.Status.ServiceStatus }

func (o *veleroLike) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	c := &veleroLike{}
	if err := json.Unmarshal(b, c); err != nil {
		panic(err)
	}
	return c
}

// TestOldStatusShapeAndReasons: an object taken over from opencontrolplane-runtime keeps
// its own status.resources through the runtime's status write, and reads the old
// Ready reason (ReconcileSuccess) the declaration asks for; the next reconcile with
// nothing changed writes nothing, although the engine works with its own reason.
func TestOldStatusShapeAndReasons(t *testing.T) {
	gv := schema.GroupVersion{Group: "velero.services.openmcp.cloud", Version: "v1alpha1"}
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(gv.WithKind("Velero"), &veleroLike{})
	metav1.AddToGroupVersion(scheme, gv)
	stored := &veleroLike{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "demo", Generation: 3}}
	stored.Status.Resources = []veleroResource{{Kind: "HelmRelease", Name: "velero", Phase: "Ready", Message: "installed"}}
	stored.Status.Phase = v1alpha1.PhaseReady
	meta.SetStatusCondition(&stored.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "ReconcileSuccess", Message: "Domain Service is ready", ObservedGeneration: 3})
	var writes int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored).WithStatusSubresource(&veleroLike{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	decl := &migration.FromOCR{Reasons: migration.OCRReasons}
	reconcileOnce := func() *veleroLike {
		obj := &veleroLike{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), obj); err != nil {
			t.Fatal(err)
		}
		w := &writer[*veleroLike]{client: c, obj: obj, read: obj.DeepCopyObject().(*veleroLike), identity: "team/demo",
			written: &writtenStatuses{newMemory[writtenStatus](time.Minute)}, readVersion: obj.GetResourceVersion(), reason: decl.Reason}
		setReady(obj.GetServiceStatus(), obj.Generation, metav1.ConditionTrue, v1alpha1.ReasonReady, "service is installed", v1alpha1.PhaseReady)
		if err := w.writeStatus(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonReady {
			t.Errorf("after the write the engine sees %+v, want its own reason Ready", c)
		}
		got := &veleroLike{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	got := reconcileOnce()
	if len(got.Status.Resources) != 1 || got.Status.Resources[0] != stored.Status.Resources[0] {
		t.Errorf("status.resources %+v, want the provider's own %+v kept", got.Status.Resources, stored.Status.Resources)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != "ReconcileSuccess" || c.Message != "service is installed" {
		t.Errorf("stored Ready %+v, want reason ReconcileSuccess (the old vocabulary) with the runtime's message", c)
	}
	writes = 0
	reconcileOnce()
	if writes != 0 {
		t.Errorf("%d status writes of an unchanged object, want 0: the written reason must compare equal to the stored one", writes)
	}
}

// waitingProvider waits in both methods, in its own words.
type waitingProvider struct{ reason string }

func (p waitingProvider) CreateOrUpdate(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Result{InProgress: true, Reason: p.reason, Message: "the bucket is being created"}, nil
}

func (p waitingProvider) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Result{InProgress: true, Reason: "UserResourcesExist", Message: "3 backups of the tenant remain"}, nil
}

// TestProviderReason: a provider that waits names the reason the tenant reads, as
// opencontrolplane-runtime's StatusTerminatingWithReason let it (UserResourcesExist
// for a deletion the tenant's objects hold up); a reason the API server would refuse
// falls back to the runtime's own.
func TestProviderReason(t *testing.T) {
	for _, c := range []struct{ reason, want string }{
		{"WaitingForBucket", "WaitingForBucket"},
		{"not a reason", v1alpha1.ReasonProgressing},
		{"", v1alpha1.ReasonProgressing},
	} {
		obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer}}}
		s := newLaggingServer(t, obj, waitingProvider{reason: c.reason})
		opts := testOptions(t, waitingProvider{reason: c.reason})
		opts.LiveReader = func(c ctrlcluster.Cluster) (client.Reader, error) { return c.GetAPIReader(), nil }
		s.engine = New(opts, widgetClusters(s.server))
		s.reconcile(t)
		got := s.read(t)
		if r := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != c.want || got.Status.Phase != v1alpha1.PhaseProgressing {
			t.Errorf("provider reason %q: Ready %+v, phase %s; want reason %s, Progressing", c.reason, r, got.Status.Phase, c.want)
		}
		if err := s.server.Delete(context.Background(), got); err != nil {
			t.Fatal(err)
		}
		s.reconcile(t)
		got = s.read(t)
		if r := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != "UserResourcesExist" ||
			r.Message != "3 backups of the tenant remain" || got.Status.Phase != v1alpha1.PhaseTerminating {
			t.Errorf("blocked deletion: Ready %+v, phase %s; want UserResourcesExist with the provider's message, Terminating", r, got.Status.Phase)
		}
	}
}
