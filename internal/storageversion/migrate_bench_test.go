package storageversion

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

func TestMain(m *testing.M) { harness.Main(m) }

// BenchmarkMigrate moves n stored objects between two versions with the same schema
// on a real API server, while a tenant patches objects the whole time, two ways side
// by side: Migrate (an empty merge patch per object) and the classic migrator's way
// (each listed object sent back whole with its resourceVersion, read again and resent
// on a conflict). Each iteration switches the storage version and migrates. Reported:
// requests per object, the migrator's conflicts per run, and the tenant's failed
// writes (the target is 0).
//
//	make bench-upgrades
func BenchmarkMigrate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			server, err := harness.NewEnv(b, "migrate-bench").StartAPIServer(localenv.PurposeOnboarding, nil)
			if err != nil {
				b.Fatal(err)
			}
			env := newBenchEnv(b, server.Config, n)
			for _, way := range []struct {
				name    string
				migrate func(ctx context.Context, cfg *rest.Config, conflicts *atomic.Int64) error
			}{
				{"empty-patch", func(ctx context.Context, cfg *rest.Config, _ *atomic.Int64) error {
					_, err := Migrate(ctx, cfg, benchCRD, Options{})
					return err
				}},
				{"get-update", classicMigrate},
			} {
				b.Run(way.name, func(b *testing.B) {
					var requests, conflicts atomic.Int64
					cfg := rest.CopyConfig(server.Config)
					cfg.QPS, cfg.Burst = 200, 400
					cfg.WrapTransport = harness.CountRequests(&requests)
					tenantErrs := env.tenantWriting(b)
					for b.Loop() {
						b.StopTimer()
						env.switchStorage(b)
						b.StartTimer()
						if err := way.migrate(b.Context(), cfg, &conflicts); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(requests.Load())/float64(n*b.N), "req/object")
					b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/run")
					b.ReportMetric(float64(tenantErrs()), "tenant-errors")
				})
			}
		})
	}
}

const (
	benchGroup = "bench.storage.test"
	benchCRD   = "items." + benchGroup
)

type benchEnv struct {
	cfg     *rest.Config
	crds    apiextensionsclient.Interface
	objects dynamic.NamespaceableResourceInterface
	n       int
}

// newBenchEnv installs a CRD serving v1 and v2 with the same schema, stored in v1,
// with n objects.
func newBenchEnv(b *testing.B, cfg *rest.Config, n int) *benchEnv {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	schemaOf := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size": {Type: "integer"}}}}}}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: benchCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: benchGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "items", Singular: "item", Kind: "Item", ListKind: "ItemList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf},
				{Name: "v2", Served: true, Schema: schemaOf},
			}}}
	ctx := b.Context()
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{cfg: cfg, crds: crds, objects: dyn.Resource(schema.GroupVersionResource{Group: benchGroup, Version: "v1", Resource: "items"}), n: n}
	gvr := schema.GroupVersionResource{Group: benchGroup, Version: "v1", Resource: "items"}
	if err := waitForStorage(ctx, crds, gvr, "Item", 100*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": benchGroup + "/v1", "kind": "Item",
				"metadata": map[string]any{"name": fmt.Sprintf("item-%05d", i), "namespace": "default"},
				"spec":     map[string]any{"size": int64(i)}}}
			if _, err := e.objects.Namespace("default").Create(ctx, o, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return e
}

// switchStorage makes the other version the storage version and waits until the API
// server writes in it.
func (e *benchEnv) switchStorage(b *testing.B) {
	ctx := b.Context()
	crd, err := e.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, benchCRD, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = !crd.Spec.Versions[i].Storage
	}
	if crd, err = e.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: benchGroup, Version: apichange.StorageVersion(crd), Resource: "items"}
	if err := waitForStorage(ctx, e.crds, gvr, "Item", 100*time.Millisecond); err != nil {
		b.Fatal(err)
	}
}

// tenantWriting patches random objects until the benchmark ends, as a tenant would;
// the returned function counts the writes that failed.
func (e *benchEnv) tenantWriting(b *testing.B) func() int64 {
	var failed atomic.Int64
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond) // a busy tenant's pace
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("item-%05d", rand.IntN(e.n))
			patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, rand.IntN(1000))
			if _, err := e.objects.Namespace("default").Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
				failed.Add(1)
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return failed.Load
}

// classicMigrate is the classic storage migrator's way, with Migrate's workers: list,
// send each object back whole with its resourceVersion, and on a conflict read it
// again and resend; then record the storage version.
func classicMigrate(ctx context.Context, cfg *rest.Config, conflicts *atomic.Int64) error {
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, benchCRD, metav1.GetOptions{})
	if err != nil {
		return err
	}
	storage := apichange.StorageVersion(crd)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := dyn.Resource(schema.GroupVersionResource{Group: benchGroup, Version: storage, Resource: "items"}).Namespace("default")
	_, _, err = rewriteEach(ctx, Options{}.workers(), func(ctx context.Context, emit emitFunc) error {
		return pages(ctx, r, 500, func(item *unstructured.Unstructured) bool {
			o := item.DeepCopy()
			return emit(o.GetResourceVersion(), func(ctx context.Context) (*unstructured.Unstructured, error) {
				for {
					got, err := r.Update(ctx, o, metav1.UpdateOptions{})
					if !apierrors.IsConflict(err) {
						return got, err
					}
					conflicts.Add(1)
					if o, err = r.Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
						return nil, err
					}
				}
			})
		})
	})
	if err != nil {
		return err
	}
	return recordStored(ctx, crds, benchCRD, storage)
}
