package apichange

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "backups.e2e.openmcp.cloud"}}
	c.Spec.Versions = versions
	return c
}

func crdVersion(name string, storage bool, spec map[string]apiextensionsv1.JSONSchemaProps, required ...string) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: spec, Required: required},
			}}}}
}

var base = map[string]apiextensionsv1.JSONSchemaProps{
	"schedule":  {Type: "string"},
	"retention": {Type: "integer", Minimum: ptr(1.0)},
	"mode":      {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"full"`)}, {Raw: []byte(`"incremental"`)}}},
}

func ptr[T any](v T) *T { return &v }

func with(m map[string]apiextensionsv1.JSONSchemaProps, edit func(map[string]apiextensionsv1.JSONSchemaProps)) map[string]apiextensionsv1.JSONSchemaProps {
	out := map[string]apiextensionsv1.JSONSchemaProps{}
	for k, v := range m {
		out[k] = v
	}
	edit(out)
	return out
}

// TestCompare: what a provider release may do to its Service API's CRD, version by
// version, and what is refused before anything changes.
func TestCompare(t *testing.T) {
	v1 := crdVersion("v1alpha1", true, base)
	stored := func(c *apiextensionsv1.CustomResourceDefinition, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		c.Status.StoredVersions = versions
		return c
	}
	webhook := func(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
		return c
	}
	for _, c := range []struct {
		name        string
		served      *apiextensionsv1.CustomResourceDefinition
		want        *apiextensionsv1.CustomResourceDefinition
		kinds       map[string]Kind
		refused     string // part of the error; "" when allowed
		storageFrom string
	}{
		{name: "first install", served: nil, want: crd(v1), kinds: map[string]Kind{"v1alpha1": Added}},
		{name: "same schema", served: crd(v1), want: crd(v1), kinds: map[string]Kind{"v1alpha1": Unchanged}},
		{name: "a new optional field", served: crd(v1),
			want: crd(crdVersion("v1alpha1", true, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) {
				m["bucket"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}))),
			kinds: map[string]Kind{"v1alpha1": Compatible}},
		{name: "a field removed", served: crd(v1),
			want:    crd(crdVersion("v1alpha1", true, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) { delete(m, "schedule") }))),
			kinds:   map[string]Kind{"v1alpha1": Breaking},
			refused: `spec lost property "schedule"`},
		{name: "a type changed", served: crd(v1),
			want: crd(crdVersion("v1alpha1", true, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) {
				m["retention"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}))),
			kinds:   map[string]Kind{"v1alpha1": Breaking},
			refused: "spec.retention changed type"},
		{name: "a field made required", served: crd(v1), want: crd(crdVersion("v1alpha1", true, base, "schedule")),
			kinds: map[string]Kind{"v1alpha1": Breaking}, refused: `requires "schedule"`},
		{name: "an enum narrowed", served: crd(v1),
			want: crd(crdVersion("v1alpha1", true, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) {
				m["mode"] = apiextensionsv1.JSONSchemaProps{Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"full"`)}}}
			}))),
			kinds: map[string]Kind{"v1alpha1": Breaking}, refused: "spec.mode changed what it accepts"},
		{name: "a new version with the same schema", served: crd(v1), want: crd(crdVersion("v1alpha1", false, base), crdVersion("v1beta1", true, base)),
			kinds: map[string]Kind{"v1alpha1": Unchanged, "v1beta1": Added}, storageFrom: "v1alpha1"},
		{name: "a new version with another schema and no conversion", served: crd(v1),
			want:  crd(v1, crdVersion("v1beta1", false, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) { delete(m, "mode") }))),
			kinds: map[string]Kind{"v1beta1": Added}, refused: "no conversion webhook"},
		{name: "a new version with another schema and a conversion webhook", served: crd(v1),
			want:  webhook(crd(v1, crdVersion("v1beta1", false, with(base, func(m map[string]apiextensionsv1.JSONSchemaProps) { delete(m, "mode") })))),
			kinds: map[string]Kind{"v1beta1": Added}},
		{name: "a version removed with objects stored in it", served: stored(crd(crdVersion("v1alpha1", false, base), crdVersion("v1beta1", true, base)), "v1alpha1", "v1beta1"),
			want: crd(crdVersion("v1beta1", true, base)), kinds: map[string]Kind{"v1alpha1": Removed}, refused: "objects may still be stored in it"},
		{name: "a version removed after the migration", served: stored(crd(crdVersion("v1alpha1", false, base), crdVersion("v1beta1", true, base)), "v1beta1"),
			want: crd(crdVersion("v1beta1", true, base)), kinds: map[string]Kind{"v1alpha1": Removed}},
		{name: "a version no longer served", served: stored(crd(crdVersion("v1alpha1", false, base), crdVersion("v1beta1", true, base)), "v1alpha1", "v1beta1"),
			want:  crd(apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Schema: v1.Schema}, crdVersion("v1beta1", true, base)),
			kinds: map[string]Kind{"v1alpha1": Removed}, refused: "objects may still be stored in it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Compare(c.served, c.want)
			got := map[string]Kind{}
			for _, ch := range v.Changes {
				got[ch.Version] = ch.Kind
			}
			for version, kind := range c.kinds {
				if got[version] != kind {
					t.Errorf("version %s: %s, want %s (changes %+v)", version, got[version], kind, v.Changes)
				}
			}
			err := v.Err()
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Errorf("error %v, want one saying %q", err, c.refused)
			}
			if c.storageFrom != "" && (v.StorageFrom != c.storageFrom || v.StorageTo == v.StorageFrom) {
				t.Errorf("storage %s to %s, want a change from %s", v.StorageFrom, v.StorageTo, c.storageFrom)
			}
		})
	}
}

// TestCheckRelease: an older binary never moves the API back unless told to.
func TestHold(t *testing.T) {
	at := func(release string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		if len(versions) == 0 {
			versions = []string{"v1alpha1"}
		}
		c := crd()
		for i, v := range versions {
			c.Spec.Versions = append(c.Spec.Versions, crdVersion(v, i == len(versions)-1, base))
		}
		if release != "" {
			c.Annotations = map[string]string{ReleaseAnnotation: release}
		}
		return c
	}
	for _, c := range []struct {
		name         string
		served, want *apiextensionsv1.CustomResourceDefinition
		allow        bool
		held, failed bool
	}{
		{"a newer binary", at("v1.4.0"), at("v1.5.0"), false, false, false},
		{"the same release", at("v1.4.0"), at("v1.4.0"), false, false, false},
		{"an older binary", at("v1.5.0"), at("v1.4.0"), false, true, false},
		{"an older binary allowed to downgrade", at("v1.5.0"), at("v1.4.0"), true, false, false},
		{"an older binary whose version is gone", at("v1.5.0", "v1beta1"), at("v1.4.0", "v1alpha1"), false, false, true},
		{"an older binary whose version is still served", at("v1.5.0", "v1alpha1", "v1beta1"), at("v1.4.0", "v1alpha1"), false, true, false},
		{"a CRD without a release", at(""), at("v1.4.0"), false, false, false},
		{"a binary without a release", at("v1.5.0"), at(""), false, false, false},
		{"the first install", nil, at("v1.0.0"), false, false, false},
	} {
		held, err := Hold(c.served, c.want, c.allow)
		if (held != "") != c.held || (err != nil) != c.failed {
			t.Errorf("%s: held %q, err %v; want held %v, failed %v", c.name, held, err, c.held, c.failed)
		}
	}
}
