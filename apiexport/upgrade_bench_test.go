package apiexport_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
)

// BenchmarkSchemaMove is an API upgrade in kcp at n bound workspaces with one object
// each, while tenants keep patching their objects: the export adds v1beta1 and stores
// in it. Reported per run: move-s, the seconds until every binding serves the new
// schema (kcp's own pace); migrate-s and migrate-req/object, storageversion.MigrateExport
// rewriting every object through the virtual workspace and recording it; floor-s and
// floor-req/object side by side, a bare client listing every object through the
// virtual workspace and patching each with the same concurrency once the bindings
// moved (on a storage switch of its own); tenant-errors, the tenants' failed writes
// during all of it (the target is 0). Sizes: KSP_BENCH_WORKSPACES (default 100).
//
//	make bench-upgrades
func BenchmarkSchemaMove(b *testing.B) {
	sizes := []int{100}
	if env := os.Getenv("KSP_BENCH_WORKSPACES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("KSP_BENCH_WORKSPACES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("workspaces=%d", n), func(b *testing.B) {
			b.StopTimer() // only the upgrade counts, not kcp's start and the workspaces
			for range b.N {
				benchSchemaMove(b, n)
			}
		})
	}
}

func benchSchemaMove(b *testing.B, n int) {
	ctx := b.Context()
	k := harness.StartKCP(b)
	providerPath, _ := k.CreateWorkspace(ctx, b, logicalcluster.NewPath("root"), "provider")
	c := k.ClientFor(b, providerPath)
	opts := apiexport.Options{Timeout: 5 * time.Minute}
	if _, err := apiexport.Provision(ctx, c, surface(b, "widgets", widgetCRD2("color")), opts); err != nil {
		b.Fatal(err)
	}
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "example.services.open-control-plane.io", Version: v, Resource: "widgets"}
	}
	tenants := make([]dynamic.ResourceInterface, n)
	start := time.Now()
	parallel(b, n, 8, func(i int) {
		path, _ := k.CreateWorkspace(ctx, b, logicalcluster.NewPath("root"), fmt.Sprintf("tenant-%d", i))
		k.CreateAPIBinding(ctx, b, path, "widgets", providerPath, "widgets", nil)
		cfg := k.ConfigFor(path)
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		tenants[i] = dyn.Resource(gvr("v1alpha1")).Namespace("default")
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.services.open-control-plane.io/v1alpha1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"color": "red"}}}
		harness.Eventually(ctx, b, time.Minute, "creating a widget", func(ctx context.Context) error {
			_, err := tenants[i].Create(ctx, o, metav1.CreateOptions{})
			return err
		})
	})
	b.Logf("%d workspaces with a widget each in %s", n, time.Since(start).Round(time.Second))

	// Tenants write throughout: each round patches one workspace's widget, in turn.
	tenantWrites := harness.StartTenantWrites(ctx, 10*time.Millisecond, func(ctx context.Context, i int) error {
		_, err := tenants[i%n].Patch(ctx, "w", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"color":"red-%d"}}`, i), metav1.PatchOptions{})
		return err
	})
	admin := k.ConfigFor(logicalcluster.NewPath("root"))
	vwURL := k.VirtualWorkspaceURLs(ctx, b, providerPath, "widgets")[0]

	b.StartTimer()
	moved := time.Now()
	expand, err := apiexport.Provision(ctx, c, surface(b, "widgets", harness.WithVersions(widgetCRD2("color"), "v1beta1", "v1alpha1", "v1beta1")), opts)
	if err != nil {
		b.Fatal(err)
	}
	waitBindings(ctx, b, admin, vwURL, expand.SchemaNames[0], n)
	moveTook := time.Since(moved)

	var migrateReqs atomic.Int64
	migrateCfg := rest.CopyConfig(admin)
	migrateCfg.QPS, migrateCfg.Burst = 100, 200
	migrateCfg.WrapTransport = harness.CountRequests(&migrateReqs)
	migrated := time.Now()
	results, err := storageversion.MigrateExport(ctx, c, migrateCfg, "widgets", storageversion.Options{Workers: 8})
	if err != nil {
		b.Fatal(err)
	}
	migrateTook := time.Since(migrated)

	// The floor, on a storage switch of its own (back to v1alpha1), so that it too
	// writes every object.
	back, err := apiexport.Provision(ctx, c, surface(b, "widgets", harness.WithVersions(widgetCRD2("color"), "v1alpha1", "v1alpha1", "v1beta1")), opts)
	if err != nil {
		b.Fatal(err)
	}
	waitBindings(ctx, b, admin, vwURL, back.SchemaNames[0], n)
	var floorReqs atomic.Int64
	floorCfg := rest.CopyConfig(admin)
	floorCfg.QPS, floorCfg.Burst = 100, 200
	floorCfg.WrapTransport = harness.CountRequests(&floorReqs)
	floorStart := time.Now()
	floorRewrite(ctx, b, floorCfg, vwURL, gvr("v1alpha1"))
	floorTook := time.Since(floorStart)
	b.StopTimer()
	tenantWrites.Stop(b)
	if len(results) != 1 || results[0].Listed != n {
		b.Errorf("migration %+v, want %d objects", results, n)
	}
	b.ReportMetric(moveTook.Seconds(), "move-s")
	b.ReportMetric(migrateTook.Seconds(), "migrate-s")
	b.ReportMetric(float64(migrateReqs.Load())/float64(n), "migrate-req/object")
	b.ReportMetric(floorTook.Seconds(), "floor-s")
	b.ReportMetric(float64(floorReqs.Load())/float64(n), "floor-req/object")
	b.ReportMetric(float64(tenantWrites.Failed()), "tenant-errors")
}

// waitBindings polls the virtual workspace until n bindings serve schemaName.
func waitBindings(ctx context.Context, b *testing.B, admin *rest.Config, vwURL, schemaName string, n int) {
	cfg := rest.CopyConfig(admin)
	cfg.Host = vwURL + "/clusters/*"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	harness.Eventually(ctx, b, 10*time.Minute, "every binding on the new schema", func(ctx context.Context) error {
		list, err := dyn.Resource(schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apibindings"}).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		on := 0
		for _, item := range list.Items {
			ab := &apisv1alpha1.APIBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, ab); err != nil {
				return err
			}
			for _, r := range ab.Status.BoundResources {
				if r.Resource == "widgets" && r.Schema.Name == schemaName {
					on++
				}
			}
		}
		if on < n {
			return fmt.Errorf("%d of %d", on, n)
		}
		return nil
	})
}

// floorRewrite lists every object through the virtual workspace and patches each in
// its workspace, eight at a time.
func floorRewrite(ctx context.Context, b *testing.B, cfg *rest.Config, vwURL string, gvr schema.GroupVersionResource) {
	all := rest.CopyConfig(cfg)
	all.Host = vwURL + "/clusters/*"
	dyn, err := dynamic.NewForConfig(all)
	if err != nil {
		b.Fatal(err)
	}
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, len(list.Items), 8, func(i int) {
		item := list.Items[i]
		one := rest.CopyConfig(cfg)
		one.Host = vwURL + "/clusters/" + logicalcluster.From(&item).String()
		c, err := dynamic.NewForConfigAndClient(one, hc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Resource(gvr).Namespace(item.GetNamespace()).Patch(ctx, item.GetName(), types.MergePatchType, []byte("{}"), metav1.PatchOptions{}); err != nil {
			b.Error(err)
		}
	})
}

func parallel(b *testing.B, n, concurrency int, fn func(i int)) {
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
