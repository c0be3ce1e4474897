package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
)

func TestMain(m *testing.M) { harness.Main(m) }

// backupCRD is a Service API of one version, v1alpha1, with spec fields fields (all
// strings), at an API release.
func backupCRD(release string, fields ...string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, f := range fields {
		props[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "backups.upgrade.test",
		Annotations: map[string]string{apichange.ReleaseAnnotation: release}}}
	c.Spec = apiextensionsv1.CustomResourceDefinitionSpec{Group: "upgrade.test", Scope: apiextensionsv1.NamespaceScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "backups", Singular: "backup", Kind: "Backup", ListKind: "BackupList"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}}}}}}}
	return c
}

// onboardingServer starts a real API server and returns a client of it and its config.
func onboardingServer(t *testing.T, name string) (client.Client, *rest.Config) {
	t.Helper()
	server, err := harness.NewEnv(t, name).StartAPIServer(localenv.PurposeOnboarding, nil)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := PlatformScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(server.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, server.Config
}

// TestInitRefusesLossyChanges: on a real API server with an object stored, init's CRD
// install takes a compatible change, refuses a release that drops a field, and leaves
// the CRD to an older release; the served CRD and the object stay as they were.
func TestInitRefusesLossyChanges(t *testing.T) {
	ctx := context.Background()
	c, cfg := onboardingServer(t, "upgrade")
	if err := installCRD(ctx, logr.Discard(), c, cfg, backupCRD("v1.0.0", "schedule"), false); err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "upgrade.test", Version: "v1alpha1", Kind: "Backup"})
	obj.SetNamespace("default")
	obj.SetName("demo")
	_ = unstructured.SetNestedField(obj.Object, "daily", "spec", "schedule")
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}

	if err := installCRD(ctx, logr.Discard(), c, cfg, backupCRD("v1.1.0", "schedule", "bucket"), false); err != nil {
		t.Errorf("a new optional field refused: %v", err)
	}
	for _, bad := range []struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		says string
	}{
		{backupCRD("v1.2.0", "bucket"), `lost property "schedule"`},
	} {
		err := installCRD(ctx, logr.Discard(), c, cfg, bad.crd, false)
		var refused *refusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("release %s: %v, want a refusal saying %q", bad.crd.Annotations[apichange.ReleaseAnnotation], err, bad.says)
		}
	}
	// An older release (an old init Job retried, a rollback) leaves the CRD as it is
	// and succeeds, so the old replicas roll and serve through the newer CRD.
	if err := installCRD(ctx, logr.Discard(), c, cfg, backupCRD("v1.0.0", "schedule"), false); err != nil {
		t.Errorf("an older release: %v, want the CRD left as it is and init succeeding", err)
	}
	served := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "backups.upgrade.test"}, served); err != nil {
		t.Fatal(err)
	}
	props := served.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	if _, ok := props["schedule"]; !ok || served.Annotations[apichange.ReleaseAnnotation] != "v1.1.0" {
		t.Errorf("served CRD at release %s with spec fields %v, want v1.1.0 with schedule kept", served.Annotations[apichange.ReleaseAnnotation], props)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "schedule"); s != "daily" {
		t.Errorf("stored spec.schedule %q, want daily", s)
	}
	if err := installCRD(ctx, logr.Discard(), c, cfg, backupCRD("v1.0.0", "schedule", "bucket"), true); err != nil {
		t.Errorf("a deliberate downgrade (--allow-api-downgrade) refused: %v", err)
	}
}

// TestInitMovesStoredObjects: on a real API server with objects stored and a tenant
// writing throughout, a release that adds v1beta1 with the same schema and stores in
// it is applied, init rewrites every object in v1beta1 and records it in
// status.storedVersions; a release removing v1alpha1 is refused while objects may be
// stored in it and applied once they are not; a new version with another schema and
// no conversion is refused. No object loses a field and the tenant sees no error.
func TestInitMovesStoredObjects(t *testing.T) {
	ctx := t.Context()
	c, cfg := onboardingServer(t, "storage")
	install := func(crd *apiextensionsv1.CustomResourceDefinition) error {
		return installCRD(ctx, logr.Discard(), c, cfg, crd, false)
	}
	if err := install(backupCRD("v1.0.0", "schedule")); err != nil {
		t.Fatal(err)
	}
	backup := func(version, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(schema.GroupVersionKind{Group: "upgrade.test", Version: version, Kind: "Backup"})
		o.SetNamespace("default")
		o.SetName(name)
		return o
	}
	const stored = 200
	before := map[string]string{} // name -> resourceVersion
	for i := range stored {
		o := backup("v1alpha1", fmt.Sprintf("stored-%03d", i))
		_ = unstructured.SetNestedField(o.Object, fmt.Sprintf("daily-%d", i), "spec", "schedule")
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		before[o.GetName()] = o.GetResourceVersion()
	}

	// A tenant creating and changing its own objects through v1alpha1 the whole time.
	tenant := harness.StartTenantWrites(ctx, 10*time.Millisecond, func(ctx context.Context, i int) error {
		o := backup("v1alpha1", fmt.Sprintf("tenant-%03d", i%20))
		_ = unstructured.SetNestedField(o.Object, fmt.Sprintf("hourly-%d", i), "spec", "schedule")
		err := c.Create(ctx, o.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			err = c.Patch(ctx, o, client.Merge)
		}
		return err
	})

	// A new version whose schema differs, with no conversion: refused before anything changes.
	other := harness.WithVersions(backupCRD("v1.1.0", "schedule"), "v1alpha1", "v1alpha1")
	beta2 := *backupCRD("v1.1.0", "schedule", "bucket").Spec.Versions[0].DeepCopy()
	beta2.Name, beta2.Storage = "v1beta2", false
	other.Spec.Versions = append(other.Spec.Versions, beta2)
	if err := install(other); err == nil || !strings.Contains(err.Error(), "version v1beta2") {
		t.Errorf("a new version with another schema and no conversion: %v, want a refusal naming v1beta2", err)
	}

	// Expand: v1beta1 beside v1alpha1, stored in v1beta1.
	start := time.Now()
	if err := install(harness.WithVersions(backupCRD("v1.1.0", "schedule"), "v1beta1", "v1alpha1", "v1beta1")); err != nil {
		t.Fatalf("v1beta1 with v1alpha1's schema, stored in v1beta1: %v", err)
	}
	t.Logf("v1beta1 installed and every object moved to it in %s", time.Since(start).Round(time.Millisecond))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "backups.upgrade.test"}, crd); err != nil {
		t.Fatal(err)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1beta1" {
		t.Errorf("status.storedVersions %v after init, want [v1beta1]", got)
	}
	for name, rv := range before {
		o := backup("v1beta1", name)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if o.GetResourceVersion() == rv {
			t.Errorf("%s not rewritten (resourceVersion %s as before)", name, rv)
		}
	}

	tenant.Stop(t)

	// What a stale record would say: storedVersions naming v1alpha1 again. Removing
	// v1alpha1 is refused then; a second migration finds every object in v1beta1
	// already and writes none of them.
	crd.Status.StoredVersions = []string{"v1alpha1", "v1beta1"}
	if err := c.Status().Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	contract := harness.WithVersions(backupCRD("v1.2.0", "schedule"), "v1beta1", "v1beta1")
	if err := install(contract); err == nil || !strings.Contains(err.Error(), "rewrite them in the storage version first") {
		t.Errorf("removing v1alpha1 while storedVersions names it: %v, want a refusal", err)
	}
	res, err := storageversion.Migrate(ctx, cfg, "backups.upgrade.test", storageversion.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed < stored || res.Rewritten != 0 {
		t.Errorf("second migration: %+v, want every object listed and none rewritten", res)
	}

	// Contract: v1alpha1 removed once nothing is stored in it.
	if err := install(contract); err != nil {
		t.Errorf("removing v1alpha1 after the migration: %v", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "upgrade.test", Version: "v1beta1", Kind: "BackupList"})
	if err := c.List(ctx, list); err != nil {
		t.Fatalf("listing through v1beta1 alone: %v", err)
	}
	got := 0
	for _, o := range list.Items {
		if s, _, _ := unstructured.NestedString(o.Object, "spec", "schedule"); s == "" {
			t.Errorf("%s lost spec.schedule", o.GetName())
		}
		if strings.HasPrefix(o.GetName(), "stored-") {
			got++
		}
	}
	if got != stored {
		t.Errorf("%d stored objects readable through v1beta1, want %d", got, stored)
	}
}

// TestInitReportsOnProviderConfig: init's refusal shows on the ProviderConfig as
// APIUpgrade False with reason APIChangeRefused and the refusal, and the next init that
// installs its CRDs sets it True; another failure (not the API's) changes nothing.
func TestInitReportsOnProviderConfig(t *testing.T) {
	ctx := context.Background()
	c, cfg := onboardingServer(t, "report")
	serviceCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := installCRD(ctx, logr.Discard(), c, cfg, configCRD, false); err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, widget.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	pcs := harness.NewClient(t, cfg, s)
	if err := pcs.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}}); err != nil {
		t.Fatal(err)
	}
	d := &described{Provider: Provider{Name: "widgets", APIRelease: "v1.2.0", NewRuntime: func(name string, kcp apiexport.Provisionable) (Runner, error) {
		return widgetbuilder.New(name, s, widget.MCPPermissions).Complete(widget.Provider{})
	}}, service: serviceCRD, exportName: "widgets"}
	condition := func() *metav1.Condition {
		pc := &widget.WidgetConfig{}
		if err := pcs.Get(ctx, client.ObjectKey{Name: "widgets"}, pc); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionAPIUpgrade)
	}

	refusal := &refusedError{errors.New(`refusing the change of CRD widgets.services.open-control-plane.io: version v1alpha1: lost property "color"`)}
	reportAPIUpgrade(ctx, logr.Discard(), cfg, d, "widgets", fmt.Errorf("installing CRD widgets on the onboarding cluster: %w", refusal))
	got := condition()
	if got == nil || got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonAPIChangeRefused || !strings.Contains(got.Message, `lost property "color"`) {
		t.Fatalf("after a refusal: APIUpgrade %+v, want False, %s, naming the lost property", got, v1alpha1.ReasonAPIChangeRefused)
	}
	reportAPIUpgrade(ctx, logr.Discard(), cfg, d, "widgets", errors.New("onboarding cluster unreachable"))
	if again := condition(); again.Reason != v1alpha1.ReasonAPIChangeRefused {
		t.Errorf("after a failure that is not the API's: APIUpgrade %+v, want the refusal kept", again)
	}
	reportAPIUpgrade(ctx, logr.Discard(), cfg, d, "widgets", nil)
	if got := condition(); got.Status != metav1.ConditionTrue || got.Reason != v1alpha1.ReasonAPIInstalled || !strings.Contains(got.Message, "v1.2.0") {
		t.Errorf("after an install: APIUpgrade %+v, want True, %s, naming v1.2.0", got, v1alpha1.ReasonAPIInstalled)
	}
}
