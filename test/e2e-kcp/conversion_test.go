package e2ekcp

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
	"github.com/openmcp-project/kcp-serviceprovider/testkit"
)

// The widget API in a second version, v1beta1, which spells the colour as the British
// do; v1alpha1 (the Go type the runtime reconciles, stored) is the hub.
type (
	widgetHub     struct{ widget.Widget }
	widgetV1beta1 struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              struct {
			Colour   string `json:"colour,omitempty"`
			Fail     string `json:"fail,omitempty"`
			Terminal bool   `json:"terminal,omitempty"`
			Panic    string `json:"panic,omitempty"`
		} `json:"spec,omitempty"`
		Status widget.WidgetStatus `json:"status,omitempty"`
	}
)

func (*widgetHub) Hub() {}
func (w *widgetHub) DeepCopyObject() runtime.Object {
	return &widgetHub{Widget: *w.DeepCopy()}
}

func (w *widgetV1beta1) DeepCopyObject() runtime.Object {
	out, meta := *w, &w.ObjectMeta
	meta.DeepCopyInto(&out.ObjectMeta)
	w.Status.DeepCopyInto(&out.Status)
	return &out
}

func (w *widgetV1beta1) ConvertTo(h crconversion.Hub) error {
	hub := h.(*widgetHub)
	hub.ObjectMeta, hub.Status = w.ObjectMeta, w.Status
	hub.Spec = widget.WidgetSpec{Color: w.Spec.Colour, Fail: w.Spec.Fail, Terminal: w.Spec.Terminal, Panic: w.Spec.Panic}
	return nil
}

func (w *widgetV1beta1) ConvertFrom(h crconversion.Hub) error {
	hub := h.(*widgetHub)
	w.ObjectMeta, w.Status = hub.ObjectMeta, hub.Status
	w.Spec.Colour, w.Spec.Fail, w.Spec.Terminal, w.Spec.Panic = hub.Spec.Color, hub.Spec.Fail, hub.Spec.Terminal, hub.Spec.Panic
	return nil
}

// widgetVersions is what a provider hands to the conversion webhook: both versions'
// Go types.
func widgetVersions() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(widget.GroupVersion.WithKind("Widget"), &widgetHub{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: widget.GroupVersion.Group, Version: "v1beta1", Kind: "Widget"}, &widgetV1beta1{})
	return s
}

// widgetCRDTwoVersions is the widget CRD serving v1beta1 beside v1alpha1 (stored).
func widgetCRDTwoVersions(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	crd, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	crd = crd.DeepCopy()
	v1beta1 := *crd.Spec.Versions[0].DeepCopy()
	v1beta1.Name, v1beta1.Storage = "v1beta1", false
	spec := v1beta1.Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["colour"] = spec.Properties["color"]
	delete(spec.Properties, "color")
	v1beta1.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	crd.Spec.Versions = append(crd.Spec.Versions, v1beta1)
	return crd
}

// TestConversionWebhookServedByStart: a provider whose Service API has two versions
// with different schemas, started with builder.Runtime.Start alone (no command), serves
// its conversion webhook and provisions the kcp schema converting through it. A tenant
// writes in v1beta1, the runtime reconciles in v1alpha1, and each reads the other's
// fields; deletion through v1beta1 leaves nothing on the workload cluster.
func TestConversionWebhookServedByStart(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	harness.LogToTest(t)
	e := newKCPEnvOn(ctx, t, sharedPlatform1)

	// What init does: the webhook's certificate, for its URL, in the provider's namespace.
	endpoint, bind, _ := harness.LocalConversionWebhook(ctx, t, e.pf, "default", e.name)
	e.start(ctx, t, builder.Options{Conversion: &builder.ConversionWebhook{
		Scheme: widgetVersions(), URL: endpoint.URL, BindAddress: bind,
	}}, func(b *builder.Builder[*widget.Widget]) {
		b.KCP(apiexport.FromCRD(e.name, widgetCRDTwoVersions(t)))
	})

	tn := e.newTenant(ctx, t, "converts")
	dyn, err := dynamic.NewForConfig(e.k.ConfigFor(tn.path))
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: widget.GroupVersion.Group, Version: "v1beta1", Resource: "widgets"}).Namespace("default")
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	harness.Eventually(ctx, t, 30*time.Second, "creating the widget through v1beta1", func(ctx context.Context) error {
		_, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": widget.GroupVersion.Group + "/v1beta1", "kind": "Widget",
			"metadata": map[string]any{"namespace": main.Namespace, "name": main.Name},
			"spec":     map[string]any{"colour": "blue"},
		}}, metav1.CreateOptions{})
		return err
	})
	if w := waitReady(ctx, t, tn.c, main); w.Spec.Color != "blue" {
		t.Errorf("the widget read through v1alpha1 has color %q, want the colour blue written through v1beta1", w.Spec.Color)
	}
	wantConfigMap(ctx, t, e.wl, tn.lc, "hello", "blue")

	got, err := widgets.Get(ctx, main.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if colour, _, _ := unstructured.NestedString(got.Object, "spec", "colour"); colour != "blue" {
		t.Errorf("the widget read through v1beta1 has colour %q, want blue", colour)
	}
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if !slices.ContainsFunc(conditions, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Ready" && m["status"] == "True"
	}) {
		t.Errorf("the widget read through v1beta1 lacks the runtime's Ready=True: %v", conditions)
	}

	// A change through v1beta1 reaches the provider.
	if _, err := widgets.Patch(ctx, main.Name, types.MergePatchType, []byte(`{"spec":{"colour":"green"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantConfigMap(ctx, t, e.wl, tn.lc, "hello", "green")

	if err := widgets.Delete(ctx, main.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 2*time.Minute, "the widget deleted through v1beta1 gone, with what the runtime made for it", func(ctx context.Context) error {
		if err := localenv.Gone(tn.c.Get(ctx, main, &widget.Widget{})); err != nil {
			return err
		}
		if n := workloadObjects(ctx, t, e.wl, tn.lc) + platformRequests(ctx, t, e.pf, tn.lc); n != 0 {
			return fmt.Errorf("%d objects on the workload and platform clusters left", n)
		}
		return nil
	})
}

// TestConversionWebhookInBothModesWithTheKit: the same provider, described to the test
// kit as a provider's main describes it to the commands (its CRD files and
// Provider.Conversion), gets its webhook from the kit as init and run make it, and
// converts in both modes: a tenant in a workspace and one of a ControlPlane each
// create through v1beta1 and read the runtime's Ready back through it; deletion through
// v1alpha1 leaves nothing of the runtime's.
func TestConversionWebhookInBothModesWithTheKit(t *testing.T) {
	t.Parallel() // on a platform of the kit's own
	harness.LogToTest(t)
	const name = "widgets-converted"
	crd := widgetCRDTwoVersions(t)
	_, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	crd.Labels = map[string]string{command.ClusterLabel: clustersv1alpha1.PURPOSE_ONBOARDING}
	configCRD.Labels = map[string]string{command.ClusterLabel: clustersv1alpha1.PURPOSE_PLATFORM}
	files := fstest.MapFS{}
	for file, c := range map[string]*apiextensionsv1.CustomResourceDefinition{"crd/widgets.yaml": crd, "crd/widgetconfigs.yaml": configCRD} {
		raw, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		files[file] = &fstest.MapFile{Data: raw}
	}
	scheme := spScheme(t)
	p := testkit.ProviderOf(name, files, func(kcp apiexport.Provisionable) (command.Runner, error) {
		return widgetbuilder.New(name, scheme, widget.MCPPermissions).KCP(kcp).Complete(widget.Provider{})
	})
	p.Conversion = widgetVersions()
	env := testkit.Start(t, testkit.Options{Provider: p, Scheme: scheme, ProviderConfig: &widget.WidgetConfig{Spec: widget.WidgetConfigSpec{Greeting: "hello"}}})

	for _, tn := range env.Tenants(t, "converts") {
		t.Run(string(tn.Mode), func(t *testing.T) {
			ctx := t.Context()
			meta := tn.ObjectMeta()
			in := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": widget.GroupVersion.Group + "/v1beta1", "kind": "Widget",
				"metadata": map[string]any{"namespace": meta.Namespace, "name": meta.Name},
				"spec":     map[string]any{"colour": "blue"},
			}}
			tn.Create(t, in)
			tn.WaitReady(t, in)
			if colour, _, _ := unstructured.NestedString(in.Object, "spec", "colour"); colour != "blue" {
				t.Errorf("the Ready widget read through v1beta1 has colour %q, want blue", colour)
			}
			hub := &widget.Widget{ObjectMeta: meta}
			if err := tn.Client.Get(ctx, client.ObjectKeyFromObject(hub), hub); err != nil {
				t.Fatal(err)
			}
			if hub.Spec.Color != "blue" {
				t.Errorf("the widget read through v1alpha1 has color %q, want the colour blue written through v1beta1", hub.Spec.Color)
			}
			cm := &corev1.ConfigMap{}
			if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: tn.Identity.TenantNamespace(), Name: "widget"}, cm); err != nil || cm.Data["color"] != "blue" {
				t.Errorf("the provider's ConfigMap on the workload cluster: %v, data %v; want color blue", err, cm.Data)
			}
			tn.DeleteAndExpectNoLeftovers(t, hub)
		})
	}
}
