package apiexport_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
)

// TestStorageMigrationInKCP: on a real kcp with objects stored in three bound
// workspaces and a tenant writing throughout, the export adds v1beta1 (the same
// schema) and stores in it; removing v1alpha1 is refused until storageversion has
// rewritten every object through the export's virtual workspace and recorded it on
// the export; then v1alpha1 goes, every object stays readable with its fields, and the
// tenant saw no error.
func TestStorageMigrationInKCP(t *testing.T) {
	t.Parallel()
	ctx, k, providerPath, c := providerWorkspace(t)
	root, _ := providerPath.Parent()
	opts := apiexport.Options{Timeout: time.Minute}
	if _, err := apiexport.Provision(ctx, c, surface(t, "widgets", widgetCRD2("color")), opts); err != nil {
		t.Fatal(err)
	}
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "example.services.open-control-plane.io", Version: v, Resource: "widgets"}
	}
	const tenants, perTenant = 3, 10
	var clients []dynamic.NamespaceableResourceInterface
	for i := range tenants {
		path, _ := k.CreateWorkspace(ctx, t, root, fmt.Sprintf("tenant-%d", i))
		k.CreateAPIBinding(ctx, t, path, "widgets", providerPath, "widgets", nil)
		dyn, err := dynamic.NewForConfig(k.ConfigFor(path))
		if err != nil {
			t.Fatal(err)
		}
		r := dyn.Resource(gvr("v1alpha1"))
		clients = append(clients, r)
		for j := range perTenant {
			o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.services.open-control-plane.io/v1alpha1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("w-%02d", j), "namespace": "default"}, "spec": map[string]any{"color": "red"}}}
			// A binding is Bound a moment before the workspace serves the resource.
			harness.Eventually(ctx, t, 30*time.Second, "creating a widget", func(ctx context.Context) error {
				_, err := r.Namespace("default").Create(ctx, o, metav1.CreateOptions{})
				return err
			})
		}
	}

	// A tenant changing its widgets the whole time, through v1alpha1.
	tenant := harness.StartTenantWrites(ctx, 20*time.Millisecond, func(ctx context.Context, i int) error {
		patch := fmt.Appendf(nil, `{"spec":{"color":"red-%d"}}`, i)
		_, err := clients[0].Namespace("default").Patch(ctx, fmt.Sprintf("w-%02d", i%perTenant), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})

	expand, err := apiexport.Provision(ctx, c, surface(t, "widgets", harness.WithVersions(widgetCRD2("color"), "v1beta1", "v1alpha1", "v1beta1")), opts)
	if err != nil {
		t.Fatalf("adding v1beta1 with v1alpha1's schema, stored in v1beta1: %v", err)
	}
	contract := surface(t, "widgets", harness.WithVersions(widgetCRD2("color"), "v1beta1", "v1beta1"))
	if _, err := apiexport.Provision(ctx, c, contract, opts); err == nil || !strings.Contains(err.Error(), "version v1alpha1: removed") {
		t.Errorf("removing v1alpha1 before the migration: %v, want a refusal", err)
	}

	start := time.Now()
	results, err := storageversion.MigrateExport(ctx, c, k.ConfigFor(logicalcluster.NewPath("root")), "widgets", storageversion.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated in %s: %+v", time.Since(start).Round(time.Millisecond), results)
	if len(results) != 1 || results[0].To != "v1beta1" || results[0].Listed != tenants*perTenant || results[0].Rewritten == 0 {
		t.Errorf("migration %+v, want every one of %d widgets listed and moved to v1beta1", results, tenants*perTenant)
	}
	export := &apisv1alpha2.APIExport{}
	if err := c.Get(ctx, client.ObjectKey{Name: "widgets"}, export); err != nil {
		t.Fatal(err)
	}
	key := storageversion.RecordKey(schema.GroupResource{Group: "example.services.open-control-plane.io", Resource: "widgets"})
	if got := export.Annotations[key]; got != "v1beta1" {
		t.Errorf("export records %q for widgets, want v1beta1", got)
	}
	if again, err := storageversion.MigrateExport(ctx, c, k.ConfigFor(logicalcluster.NewPath("root")), "widgets", storageversion.Options{}); err != nil || len(again) != 0 {
		t.Errorf("a second migration: %+v, %v; want nothing to do", again, err)
	}
	tenant.Stop(t)

	contracted, err := apiexport.Provision(ctx, c, contract, opts)
	if err != nil {
		t.Fatalf("removing v1alpha1 after the migration: %v", err)
	}
	if contracted.SchemaNames[0] == expand.SchemaNames[0] {
		t.Fatal("the export did not move")
	}
	for i := range clients {
		harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("tenant %d's widgets through v1beta1 alone", i), func(ctx context.Context) error {
			path := root.Join(fmt.Sprintf("tenant-%d", i))
			dyn, err := dynamic.NewForConfig(k.ConfigFor(path))
			if err != nil {
				return err
			}
			list, err := dyn.Resource(gvr("v1beta1")).Namespace("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) != perTenant {
				return fmt.Errorf("%d widgets", len(list.Items))
			}
			for _, o := range list.Items {
				if color, _, _ := unstructured.NestedString(o.Object, "spec", "color"); !strings.HasPrefix(color, "red") {
					return fmt.Errorf("%s: spec.color %q", o.GetName(), color)
				}
			}
			if _, err := dyn.Resource(gvr("v1alpha1")).Namespace("default").List(ctx, metav1.ListOptions{}); err == nil {
				return fmt.Errorf("v1alpha1 still served")
			}
			return nil
		})
	}
}
