package command

import (
	"context"
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/testkit/harness"
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

// TestInitRefusesLossyChanges: on a real API server with an object stored, init's CRD
// install takes a compatible change, and refuses a release that drops a field or is
// older than the served one, leaving the served CRD and the object as they were.
func TestInitRefusesLossyChanges(t *testing.T) {
	ctx := context.Background()
	env := harness.NewEnv(t, "upgrade")
	server, err := env.StartAPIServer(localenv.PurposeOnboarding, nil)
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
	if err := installCRD(ctx, c, backupCRD("v1.0.0", "schedule"), false); err != nil {
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

	if err := installCRD(ctx, c, backupCRD("v1.1.0", "schedule", "bucket"), false); err != nil {
		t.Errorf("a new optional field refused: %v", err)
	}
	for _, bad := range []struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		says string
	}{
		{backupCRD("v1.2.0", "bucket"), `lost property "schedule"`},
		{backupCRD("v1.0.0", "schedule"), "newer than this binary's v1.0.0"},
	} {
		err := installCRD(ctx, c, bad.crd, false)
		var refused *refusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("release %s: %v, want a refusal saying %q", bad.crd.Annotations[apichange.ReleaseAnnotation], err, bad.says)
		}
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
	if err := installCRD(ctx, c, backupCRD("v1.0.0", "schedule", "bucket"), true); err != nil {
		t.Errorf("a deliberate downgrade (--allow-api-downgrade) refused: %v", err)
	}
}
