package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconversion "sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// The Service API of release v1.1.0 in two versions whose schemas differ: v1alpha1
// keeps the schedule as a cron string, v1beta1 (the hub, stored) as a cron and a time
// zone. v1alpha1 keeps the time zone in an annotation, so that a write through it
// loses nothing.
type (
	backupV1alpha1 struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              struct {
			Schedule string `json:"schedule,omitempty"`
		} `json:"spec,omitempty"`
	}
	backupV1beta1 struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              struct {
			Schedule struct {
				Cron     string `json:"cron,omitempty"`
				TimeZone string `json:"timeZone,omitempty"`
			} `json:"schedule,omitempty"`
		} `json:"spec,omitempty"`
	}
)

const timeZoneAnnotation = "upgrade.test/time-zone"

func (b *backupV1alpha1) DeepCopyObject() runtime.Object { return deepCopy(b, &backupV1alpha1{}) }
func (b *backupV1beta1) DeepCopyObject() runtime.Object  { return deepCopy(b, &backupV1beta1{}) }
func (*backupV1beta1) Hub()                              {}

func deepCopy[T runtime.Object](in, out T) runtime.Object {
	raw, _ := json.Marshal(in)
	_ = json.Unmarshal(raw, out)
	return out
}

func (b *backupV1alpha1) ConvertTo(h crconversion.Hub) error {
	hub := h.(*backupV1beta1)
	hub.ObjectMeta = *b.DeepCopy()
	hub.Spec.Schedule.Cron = b.Spec.Schedule
	hub.Spec.Schedule.TimeZone = b.Annotations[timeZoneAnnotation]
	delete(hub.Annotations, timeZoneAnnotation)
	return nil
}

func (b *backupV1alpha1) ConvertFrom(h crconversion.Hub) error {
	hub := h.(*backupV1beta1)
	b.ObjectMeta = *hub.DeepCopy()
	b.Spec.Schedule = hub.Spec.Schedule.Cron
	if tz := hub.Spec.Schedule.TimeZone; tz != "" {
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, timeZoneAnnotation, tz)
	}
	return nil
}

// backupScheme is what a provider hands to Provider.Conversion.
func backupScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "upgrade.test", Version: "v1alpha1", Kind: "Backup"}, &backupV1alpha1{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "upgrade.test", Version: "v1beta1", Kind: "Backup"}, &backupV1beta1{})
	return s
}

// backupCRDTwoVersions is release v1.1.0's CRD: v1alpha1 as backupCRD has it with
// schedule, and v1beta1 with the schedule an object, stored.
func backupCRDTwoVersions() *apiextensionsv1.CustomResourceDefinition {
	c := backupCRD("v1.1.0", "schedule")
	v1beta1 := *c.Spec.Versions[0].DeepCopy()
	v1beta1.Name = "v1beta1"
	v1beta1.Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"schedule": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"cron": {Type: "string"}, "timeZone": {Type: "string"}}}}}
	c.Spec.Versions[0].Storage = false
	c.Spec.Versions = append(c.Spec.Versions, v1beta1)
	return c
}

// startConversionWebhook prepares the conversion webhook as init does (its certificate
// in a Secret of c) and serves it as the runtime does, until the test ends. It returns the
// Service API's CRD of release v1.1.0 pointed at the webhook, as both commands leave it.
func startConversionWebhook(t *testing.T, c client.Client) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	harness.LogToTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	ports, err := localenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	common := commonOptions{providerName: "upgrade", namespace: "default", conversionWebhookURL: fmt.Sprintf("https://localhost:%d/convert", ports[0])}
	described := func() *described {
		return &described{Provider: Provider{Conversion: backupScheme(t)}, service: backupCRDTwoVersions()}
	}
	atInit := described()
	if err := common.prepareConversion(ctx, logr.Discard(), atInit, c); err != nil {
		t.Fatal(err)
	}
	atRun := described()
	endpoint, err := common.conversionEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	served, caBundle, err := conversion.Start(ctx, logr.Discard(), c, endpoint, fmt.Sprintf("127.0.0.1:%d", ports[0]), atRun.Conversion)
	if err != nil {
		t.Fatal(err)
	}
	atRun.convertThrough(endpoint.URL, caBundle)
	t.Cleanup(func() {
		cancel()
		<-served.Done()
		if err := context.Cause(served); !errors.Is(err, context.Canceled) {
			t.Errorf("conversion webhook: %v", err)
		}
	})
	if !apiequality.Semantic.DeepEqual(atInit.service, atRun.service) {
		t.Fatalf("init's CRD and run's differ:\n%+v\n%+v", atInit.service.Spec.Conversion, atRun.service.Spec.Conversion)
	}
	return atRun.service
}

// backup is a Backup in apiVersion with spec.
func backup(name, apiVersion string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "Backup",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
}

// wantBothWays checks, through r (a dynamic client of the Backups in some version),
// that what a tenant writes in one version reads in the other with every field: an
// object written through v1beta1 with a time zone reads through v1alpha1 with its
// cron, and after a v1alpha1 write of the cron it still has its time zone in v1beta1.
func wantBothWays(ctx context.Context, t *testing.T, r func(version string) dynamic.ResourceInterface, name string) {
	t.Helper()
	harness.Eventually(ctx, t, 30*time.Second, "creating a backup through v1beta1", func(ctx context.Context) error {
		_, err := r("v1beta1").Create(ctx, backup(name, "upgrade.test/v1beta1", map[string]any{
			"schedule": map[string]any{"cron": "0 2 * * *", "timeZone": "Europe/Berlin"}}), metav1.CreateOptions{})
		return err
	})
	old, err := r("v1alpha1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(old.Object, "spec", "schedule"); s != "0 2 * * *" {
		t.Errorf("%s read through v1alpha1: spec.schedule %q, want the cron 0 2 * * *", name, s)
	}
	if _, err := r("v1alpha1").Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"schedule":"0 3 * * *"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("writing %s through v1alpha1: %v", name, err)
	}
	now, err := r("v1beta1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cron, _, _ := unstructured.NestedString(now.Object, "spec", "schedule", "cron")
	tz, _, _ := unstructured.NestedString(now.Object, "spec", "schedule", "timeZone")
	if cron != "0 3 * * *" || tz != "Europe/Berlin" {
		t.Errorf("%s read through v1beta1 after a v1alpha1 write: cron %q, time zone %q; want 0 3 * * * and Europe/Berlin kept", name, cron, tz)
	}
	if _, ok := now.GetAnnotations()[timeZoneAnnotation]; ok {
		t.Errorf("%s in v1beta1 carries v1alpha1's annotation %s", name, timeZoneAnnotation)
	}
}

// TestInitConvertsThroughWebhook: on a real API server with an object stored in
// v1alpha1 and a tenant writing through v1alpha1 throughout, init installs release
// v1.1.0, whose v1beta1 has another schema: refused without conversion, accepted with
// the webhook the runtime serves; the stored object moves to v1beta1 through the
// webhook, and objects written in either version read in the other with every field.
func TestInitConvertsThroughWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, cfg := onboardingServer(t, "conversion")
	if err := installCRD(ctx, logr.Discard(), c, cfg, backupCRD("v1.0.0", "schedule"), false); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "upgrade.test", Version: version, Resource: "backups"}).Namespace("default")
	}
	if _, err := r("v1alpha1").Create(ctx, backup("stored", "upgrade.test/v1alpha1", map[string]any{"schedule": "0 1 * * *"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant := harness.StartTenantWrites(ctx, 20*time.Millisecond, func(ctx context.Context, i int) error {
		_, err := r("v1alpha1").Patch(ctx, "stored", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"write":"%d"}}}`, i), metav1.PatchOptions{})
		return err
	})

	err = installCRD(ctx, logr.Discard(), c, cfg, backupCRDTwoVersions(), false)
	if err == nil || !strings.Contains(err.Error(), "v1beta1") {
		t.Errorf("v1beta1 with another schema and no conversion: %v, want a refusal naming v1beta1", err)
	}
	want := startConversionWebhook(t, c)
	if err := installCRD(ctx, logr.Discard(), c, cfg, want, false); err != nil {
		t.Fatalf("v1beta1 converted by the runtime's webhook: %v", err)
	}
	tenant.Stop(t)
	if n := tenant.Failed(); n != 0 {
		t.Errorf("the tenant's writes failed %d times during the upgrade", n)
	}

	served := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "backups.upgrade.test"}, served); err != nil {
		t.Fatal(err)
	}
	if got := served.Status.StoredVersions; len(got) != 1 || got[0] != "v1beta1" {
		t.Errorf("status.storedVersions %v, want [v1beta1]: the stored object moved through the webhook", got)
	}
	if served.Annotations[apichange.ReleaseAnnotation] != "v1.1.0" {
		t.Errorf("served CRD at release %q, want v1.1.0", served.Annotations[apichange.ReleaseAnnotation])
	}
	stored, err := r("v1beta1").Get(ctx, "stored", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cron, _, _ := unstructured.NestedString(stored.Object, "spec", "schedule", "cron"); cron != "0 1 * * *" {
		t.Errorf("the object stored in v1alpha1 reads through v1beta1 with cron %q, want 0 1 * * *", cron)
	}
	wantBothWays(ctx, t, r, "written")
}

// TestKCPConvertsThroughWebhook: on a real kcp, the export serves the two versions
// from the same CRD with the runtime's webhook, and a tenant in a bound workspace
// writes and reads in both with every field.
func TestKCPConvertsThroughWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := harness.StartKCP(t)
	providerPath, _ := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "provider")
	provider := k.ClientFor(t, providerPath)
	// The certificate's Secret lives on the platform cluster; a kcp workspace is an
	// API server as good as any for it.
	crd := startConversionWebhook(t, provider)
	s, err := apiexport.FromCRD("backups", crd).APISurface()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiexport.Provision(ctx, provider, s, apiexport.Options{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	tenantPath, _ := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "tenant")
	k.CreateAPIBinding(ctx, t, tenantPath, "backups", providerPath, "backups", nil)
	dyn, err := dynamic.NewForConfig(k.ConfigFor(tenantPath))
	if err != nil {
		t.Fatal(err)
	}
	wantBothWays(ctx, t, func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "upgrade.test", Version: version, Resource: "backups"}).Namespace("default")
	}, "in-kcp")
}
