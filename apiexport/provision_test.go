package apiexport_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
)

func TestMain(m *testing.M) { harness.Main(m) }

// widgetCRD is a small Service API CRD; extraField adds a property so a test can
// change the schema's content.
func widgetCRD(extraField string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "string"}}
	if extraField != "" {
		props[extraField] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.services.open-control-plane.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.services.open-control-plane.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", Properties: props},
						"status": {Type: "object", XPreserveUnknownFields: ptr(true)},
					},
				}},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// widgetCRD2 is widgetCRD with several extra fields.
func widgetCRD2(fields ...string) *apiextensionsv1.CustomResourceDefinition {
	c := widgetCRD("")
	spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, f := range fields {
		spec.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	return c
}

func surface(t testing.TB, exportName string, crd *apiextensionsv1.CustomResourceDefinition) apiexport.Surface {
	t.Helper()
	s, err := apiexport.FromCRD(exportName, crd).APISurface()
	if err != nil {
		t.Fatalf("surface: %v", err)
	}
	return s
}

// providerWorkspace returns a context bounding the test, the package's kcp, and the
// path of a provider workspace and a client of it; the provider workspace is in a
// workspace of the test's own (its parent), where the test's tenants go too.
func providerWorkspace(t *testing.T) (context.Context, *harness.KCP, logicalcluster.Path, client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	k := harness.SharedKCP(t)
	root, _ := k.OwnWorkspace(ctx, t)
	providerPath, _ := k.CreateWorkspace(ctx, t, root, "provider")
	return ctx, k, providerPath, k.ClientFor(t, providerPath)
}

// TestProvision runs the provisioning scenarios against one real kcp, in order: each
// builds on the export the previous one left behind.
func TestProvision(t *testing.T) {
	t.Parallel()
	ctx, k, providerPath, c := providerWorkspace(t)
	opts := apiexport.Options{Timeout: time.Minute}

	var first *apiexport.Provisioned
	var firstExportGen int64

	t.Run("first provision creates schema, export and endpoint slice", func(t *testing.T) {
		s := surface(t, "widgets", widgetCRD(""))
		if s.WatchedGVK != (schema.GroupVersionKind{Group: "example.services.open-control-plane.io", Version: "v1alpha1", Kind: "Widget"}) {
			t.Fatalf("FromCRD watched GVK = %v", s.WatchedGVK)
		}
		p, err := apiexport.Provision(ctx, c, s, opts)
		if err != nil {
			t.Fatalf("Provision: %v", err)
		}
		first = p
		if p.IdentityHash == "" || p.EndpointSliceName != "widgets" || len(p.SchemaNames) != 1 {
			t.Fatalf("unexpected result %+v", p)
		}
		if !strings.HasSuffix(p.SchemaNames[0], ".widgets.example.services.open-control-plane.io") {
			t.Errorf("schema name %q is not <hash>.<plural>.<group>", p.SchemaNames[0])
		}
		mustGet(ctx, t, c, p.SchemaNames[0], &apisv1alpha1.APIResourceSchema{})
		mustGet(ctx, t, c, "widgets", &apisv1alpha1.APIExportEndpointSlice{})

		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		firstExportGen = export.Generation
		if export.Status.IdentityHash != p.IdentityHash {
			t.Errorf("identity hash %q, export says %q", p.IdentityHash, export.Status.IdentityHash)
		}
		r := findResource(export, "widgets")
		if r == nil || r.Schema != p.SchemaNames[0] || r.Storage.CRD == nil {
			t.Errorf("export resources %+v do not export widgets with schema %s", export.Spec.Resources, p.SchemaNames[0])
		}
		for _, want := range apiexport.RequiredPermissionClaims() {
			got := findClaim(export, want.Group, want.Resource)
			if got == nil || !containsAll(got.Verbs, want.Verbs) {
				t.Errorf("export claims %+v lack %s with verbs %v", export.Spec.PermissionClaims, want.String(), want.Verbs)
			}
		}
	})

	t.Run("second provision with the same CRD writes nothing", func(t *testing.T) {
		if first == nil {
			t.Fatal("needs the first provision")
		}
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		rv := export.ResourceVersion
		wc, writes := countingClient(t, k.ConfigFor(providerPath))
		p, err := apiexport.Provision(ctx, wc, surface(t, "widgets", widgetCRD("")), opts)
		if err != nil {
			t.Fatalf("Provision: %v", err)
		}
		if !slices.Equal(p.SchemaNames, first.SchemaNames) || p.IdentityHash != first.IdentityHash {
			t.Errorf("second result %+v differs from first %+v", p, first)
		}
		if n := writes.Load(); n != 0 {
			t.Errorf("second Provision made %d writes, want 0", n)
		}
		mustGet(ctx, t, c, "widgets", export)
		if export.ResourceVersion != rv || export.Generation != firstExportGen {
			t.Errorf("export changed (resourceVersion %s -> %s, generation %d -> %d): Provision wrote an unchanged export",
				rv, export.ResourceVersion, firstExportGen, export.Generation)
		}
		if n := countSchemas(ctx, t, c, "widgets."); n != 1 {
			t.Errorf("%d widget schemas, want 1", n)
		}
	})

	// Someone else (an operator, another tool) adds a resource and a claim.
	gadget := widgetCRD("")
	gadget.Name = "gadgets.example.services.open-control-plane.io"
	gadget.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	gadgetSchema, err := apiexport.SchemaFor(gadget)
	if err != nil {
		t.Fatalf("gadget schema: %v", err)
	}
	foreignClaim := apisv1alpha2.PermissionClaim{GroupResource: apisv1alpha2.GroupResource{Resource: "configmaps"}, Verbs: []string{"get"}}

	t.Run("a foreign resource and claim on the export survive", func(t *testing.T) {
		if err := c.Create(ctx, gadgetSchema); err != nil {
			t.Fatalf("creating foreign schema: %v", err)
		}
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		export.Spec.Resources = append(export.Spec.Resources, apisv1alpha2.ResourceSchema{
			Name: "gadgets", Group: gadget.Spec.Group, Schema: gadgetSchema.Name,
			Storage: apisv1alpha2.ResourceSchemaStorage{CRD: &apisv1alpha2.ResourceSchemaStorageCRD{}},
		})
		export.Spec.PermissionClaims = append(export.Spec.PermissionClaims, foreignClaim)
		// A verb someone else added to one of the runtime's claims is kept too.
		for i := range export.Spec.PermissionClaims {
			if export.Spec.PermissionClaims[i].Resource == "serviceaccounts" {
				export.Spec.PermissionClaims[i].Verbs = append(export.Spec.PermissionClaims[i].Verbs, "patch")
			}
		}
		if err := c.Update(ctx, export); err != nil {
			t.Fatalf("adding foreign resource: %v", err)
		}
		gen := export.Generation

		wc, writes := countingClient(t, k.ConfigFor(providerPath))
		if _, err := apiexport.Provision(ctx, wc, surface(t, "widgets", widgetCRD("")), opts); err != nil {
			t.Fatalf("Provision: %v", err)
		}
		mustGet(ctx, t, c, "widgets", export)
		if n := writes.Load(); n != 0 || export.Generation != gen {
			t.Errorf("Provision rewrote an export that already had everything it needs (%d writes, generation %d -> %d)", n, gen, export.Generation)
		}
		assertForeignSurvived(t, export, gadgetSchema.Name)
	})

	t.Run("a changed CRD gets a new schema the export points at", func(t *testing.T) {
		if first == nil {
			t.Fatal("needs the first provision")
		}
		p, err := apiexport.Provision(ctx, c, surface(t, "widgets", widgetCRD("color")), opts)
		if err != nil {
			t.Fatalf("Provision: %v", err)
		}
		if p.SchemaNames[0] == first.SchemaNames[0] {
			t.Fatalf("changed CRD kept schema name %s", p.SchemaNames[0])
		}
		mustGet(ctx, t, c, p.SchemaNames[0], &apisv1alpha1.APIResourceSchema{})
		// The old schema stays: kcp forbids deleting a schema that bindings may use.
		mustGet(ctx, t, c, first.SchemaNames[0], &apisv1alpha1.APIResourceSchema{})
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		if r := findResource(export, "widgets"); r == nil || r.Schema != p.SchemaNames[0] {
			t.Errorf("export resources %+v do not point widgets at %s", export.Spec.Resources, p.SchemaNames[0])
		}
		if n := countResources(export, "widgets"); n != 1 {
			t.Errorf("export lists widgets %d times", n)
		}
		assertForeignSurvived(t, export, gadgetSchema.Name)
		if n := countSchemas(ctx, t, c, "widgets."); n != 2 {
			t.Errorf("%d widget schemas, want 2 (old and new)", n)
		}
	})

	t.Run("an older schema that would drop a field is refused and the export keeps the newer one", func(t *testing.T) {
		// A replica of the previous release (no "color") provisioning after the new one:
		// kcp would move every binding back and prune color from what tenants stored.
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		before := findResource(export, "widgets").Schema
		_, err := apiexport.Provision(ctx, c, surface(t, "widgets", widgetCRD("")), opts)
		if err == nil || !strings.Contains(err.Error(), `lost property "color"`) {
			t.Fatalf("Provision of the older schema: %v, want a refusal naming the lost field", err)
		}
		mustGet(ctx, t, c, "widgets", export)
		if got := findResource(export, "widgets").Schema; got != before {
			t.Errorf("export moved to %s after a refusal, want %s kept", got, before)
		}
		// A compatible change still moves it.
		p, err := apiexport.Provision(ctx, c, surface(t, "widgets", widgetCRD2("color", "shape")), opts)
		if err != nil {
			t.Fatalf("Provision with one more optional field: %v", err)
		}
		mustGet(ctx, t, c, "widgets", export)
		if got := findResource(export, "widgets").Schema; got != p.SchemaNames[0] {
			t.Errorf("export at %s, want the compatible schema %s", got, p.SchemaNames[0])
		}
	})

	t.Run("an older API release leaves the export's schemas and says so; a deliberate downgrade moves them", func(t *testing.T) {
		released := func(release string, fields ...string) *apiextensionsv1.CustomResourceDefinition {
			crd := widgetCRD2(fields...)
			crd.Annotations = map[string]string{apichange.ReleaseAnnotation: release}
			return crd
		}
		newest, err := apiexport.Provision(ctx, c, surface(t, "widgets", released("v1.2.0", "color", "shape")), opts)
		if err != nil || newest.Held != "" {
			t.Fatalf("Provision of release v1.2.0: %v (held: %q)", err, newest.Held)
		}
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "widgets", export)
		if got := export.Annotations[apichange.ReleaseAnnotation]; got != "v1.2.0" {
			t.Errorf("export records release %q, want v1.2.0", got)
		}
		// A replica of v1.1.0 (no "shape") restarting mid-rollout: it runs, through
		// the newer schema, and the export stays where it is.
		older, err := apiexport.Provision(ctx, c, surface(t, "widgets", released("v1.1.0", "color")), opts)
		if err != nil {
			t.Fatalf("Provision of the older release: %v, want it held, not failed", err)
		}
		if !strings.Contains(older.Held, "newer than this binary's v1.1.0") {
			t.Errorf("Held %q, want it to say the export's release is newer", older.Held)
		}
		mustGet(ctx, t, c, "widgets", export)
		if got := findResource(export, "widgets").Schema; got != newest.SchemaNames[0] || export.Annotations[apichange.ReleaseAnnotation] != "v1.2.0" {
			t.Errorf("export at %s, release %s; want %s, v1.2.0 kept", got, export.Annotations[apichange.ReleaseAnnotation], newest.SchemaNames[0])
		}
		// A downgrade on purpose moves it, as far as nothing stored is lost.
		down := opts
		down.AllowDowngrade = true
		back, err := apiexport.Provision(ctx, c, surface(t, "widgets", released("v1.1.0", "color", "shape", "size")), down)
		if err != nil || back.Held != "" {
			t.Fatalf("a deliberate downgrade: %v (held: %q)", err, back.Held)
		}
		mustGet(ctx, t, c, "widgets", export)
		if got := findResource(export, "widgets").Schema; got != back.SchemaNames[0] || export.Annotations[apichange.ReleaseAnnotation] != "v1.1.0" {
			t.Errorf("export at %s, release %s after the downgrade; want %s, v1.1.0", got, export.Annotations[apichange.ReleaseAnnotation], back.SchemaNames[0])
		}
	})

	t.Run("concurrent provisions both succeed with one export and one schema", func(t *testing.T) {
		crd := widgetCRD("")
		crd.Name = "sprockets.example.services.open-control-plane.io"
		crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "sprockets", Singular: "sprocket", Kind: "Sprocket", ListKind: "SprocketList"}
		s := surface(t, "sprockets", crd)
		s.PermissionClaims = []apisv1alpha2.PermissionClaim{{GroupResource: apisv1alpha2.GroupResource{Resource: "secrets"}, Verbs: []string{"get"}}}

		const replicas = 4
		results := make([]*apiexport.Provisioned, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range replicas {
			// Separate clients, as separate replicas would have.
			ci := k.ClientFor(t, providerPath)
			wg.Go(func() {
				<-start
				results[i], errs[i] = apiexport.Provision(ctx, ci, s, opts)
			})
		}
		close(start)
		wg.Wait()
		for i := range replicas {
			if errs[i] != nil {
				t.Fatalf("replica %d: %v", i, errs[i])
			}
			if results[i].IdentityHash != results[0].IdentityHash || !slices.Equal(results[i].SchemaNames, results[0].SchemaNames) {
				t.Errorf("replica %d got %+v, replica 0 %+v", i, results[i], results[0])
			}
		}
		if n := countSchemas(ctx, t, c, "sprockets."); n != 1 {
			t.Errorf("%d sprocket schemas, want 1", n)
		}
		export := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "sprockets", export)
		if n := countResources(export, "sprockets"); n != 1 {
			t.Errorf("export lists sprockets %d times", n)
		}
		if findClaim(export, "", "secrets") == nil || findClaim(export, "", "serviceaccounts") == nil {
			t.Errorf("export claims %+v lack the provider's or the runtime's claims", export.Spec.PermissionClaims)
		}
	})

	t.Run("the documented provider-workspace RBAC suffices", func(t *testing.T) {
		cfg := serviceAccountConfig(ctx, t, k, providerPath, c, "provisioner", []rbacv1.PolicyRule{
			{APIGroups: []string{"apis.kcp.io"}, Resources: []string{"apiresourceschemas"}, Verbs: []string{"get", "create"}},
			{APIGroups: []string{"apis.kcp.io"}, Resources: []string{"apiexports"}, Verbs: []string{"get", "create", "update", "bind"}},
			{APIGroups: []string{"apis.kcp.io"}, Resources: []string{"apiexportendpointslices"}, Verbs: []string{"get", "create"}},
		})
		sc, err := client.New(cfg, client.Options{Scheme: harness.Scheme()})
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		crd := widgetCRD("")
		crd.Name = "gizmos.example.services.open-control-plane.io"
		crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"}
		if _, err := apiexport.Provision(ctx, sc, surface(t, "gizmos", crd), opts); err != nil {
			t.Fatalf("Provision as a ServiceAccount with the documented RBAC: %v", err)
		}
		// kcp mode's storage record (a schema of one version needs no rewrite).
		if _, err := storageversion.MigrateExport(ctx, sc, cfg, "gizmos", storageversion.Options{}); err != nil {
			t.Fatalf("recording the storage version as a ServiceAccount with the documented RBAC: %v", err)
		}
		gizmos := &apisv1alpha2.APIExport{}
		mustGet(ctx, t, c, "gizmos", gizmos)
		if got := gizmos.Annotations[storageversion.RecordKey(schema.GroupResource{Group: crd.Spec.Group, Resource: "gizmos"})]; got != "v1alpha1" {
			t.Errorf("storage record %q, want v1alpha1", got)
		}
		// An export that asks kcp not to create the endpoint slice makes Provision
		// create it, which needs bind on the export.
		skip := &apisv1alpha2.APIExport{ObjectMeta: metav1.ObjectMeta{
			Name:        "skipped",
			Annotations: map[string]string{apisv1alpha2.APIExportEndpointSliceSkipAnnotation: "true"},
		}}
		if err := sc.Create(ctx, skip); err != nil {
			t.Fatalf("creating export with skip annotation: %v", err)
		}
		crd.Name = "doohickeys.example.services.open-control-plane.io"
		crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "doohickeys", Singular: "doohickey", Kind: "Doohickey", ListKind: "DoohickeyList"}
		p, err := apiexport.Provision(ctx, sc, surface(t, "skipped", crd), opts)
		if err != nil {
			t.Fatalf("Provision of an export kcp gives no endpoint slice: %v", err)
		}
		mustGet(ctx, t, c, p.EndpointSliceName, &apisv1alpha1.APIExportEndpointSlice{})
	})
}

// serviceAccountConfig creates a ServiceAccount in the workspace with a ClusterRole of
// rules and returns a config authenticating as it.
func serviceAccountConfig(ctx context.Context, t *testing.T, k *harness.KCP, path logicalcluster.Path, c client.Client, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}},
	}
	for _, o := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, name, err)
		}
	}
	cs, err := kubernetes.NewForConfig(k.ConfigFor(path))
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", name, err)
	}
	cfg := rest.AnonymousClientConfig(k.ConfigFor(path))
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// countingClient returns a client for cfg that counts its writes.
func countingClient(t *testing.T, cfg *rest.Config) (client.Client, *atomic.Int64) {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: harness.Scheme()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	var n atomic.Int64
	wc := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n.Add(1)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
	})
	return wc, &n
}

func mustGet(ctx context.Context, t *testing.T, c client.Client, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, name, err)
	}
}

func assertForeignSurvived(t *testing.T, export *apisv1alpha2.APIExport, gadgetSchema string) {
	t.Helper()
	if r := findResource(export, "gadgets"); r == nil || r.Schema != gadgetSchema {
		t.Errorf("foreign resource gadgets lost: %+v", export.Spec.Resources)
	}
	if findClaim(export, "", "configmaps") == nil {
		t.Errorf("foreign claim configmaps lost: %+v", export.Spec.PermissionClaims)
	}
	if sa := findClaim(export, "", "serviceaccounts"); sa == nil || !slices.Contains(sa.Verbs, "patch") {
		t.Errorf("foreign verb patch on serviceaccounts lost: %+v", export.Spec.PermissionClaims)
	}
}

func findResource(export *apisv1alpha2.APIExport, name string) *apisv1alpha2.ResourceSchema {
	for i, r := range export.Spec.Resources {
		if r.Name == name {
			return &export.Spec.Resources[i]
		}
	}
	return nil
}

func countResources(export *apisv1alpha2.APIExport, name string) int {
	n := 0
	for _, r := range export.Spec.Resources {
		if r.Name == name {
			n++
		}
	}
	return n
}

func findClaim(export *apisv1alpha2.APIExport, group, resource string) *apisv1alpha2.PermissionClaim {
	for i, c := range export.Spec.PermissionClaims {
		if c.Group == group && c.Resource == resource {
			return &export.Spec.PermissionClaims[i]
		}
	}
	return nil
}

// countSchemas counts the APIResourceSchemas whose name, after the hash prefix,
// starts with plural.
func countSchemas(ctx context.Context, t *testing.T, c client.Client, pluralDot string) int {
	t.Helper()
	list := &apisv1alpha1.APIResourceSchemaList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatalf("listing schemas: %v", err)
	}
	n := 0
	for _, s := range list.Items {
		if _, rest, ok := strings.Cut(s.Name, "."); ok && strings.HasPrefix(rest, pluralDot) {
			n++
		}
	}
	return n
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
