package storageversion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
)

// Options tune [Migrate]. The zero value is usable.
type Options struct {
	// PageSize is how many objects one list call returns. Default 500.
	PageSize int64
	// Workers rewrite objects in parallel. Default 4.
	Workers int
	// PollInterval is how often Migrate looks whether the API server writes in the
	// new storage version yet. Default 200 ms.
	PollInterval time.Duration
}

func (o Options) pageSize() int64 {
	if o.PageSize <= 0 {
		return 500
	}
	return o.PageSize
}

func (o Options) workers() int {
	if o.Workers <= 0 {
		return 4
	}
	return o.Workers
}

// Result says what Migrate did.
type Result struct {
	// From are the CRD's stored versions before; To its storage version, which is
	// all status.storedVersions names afterwards.
	From []string
	To   string
	// Listed objects were found; Rewritten of them have a new resourceVersion: they
	// were written again, or changed by someone else meanwhile. The others were stored
	// in To already, which the API server does not write twice.
	Listed, Rewritten int
}

// Needed reports whether crd has objects that may be stored in a version other than
// its storage version.
func Needed(crd *apiextensionsv1.CustomResourceDefinition) bool {
	storage := apichange.StorageVersion(crd)
	return storage != "" && !slices.Equal(crd.Status.StoredVersions, []string{storage})
}

// Migrate rewrites every object of the CRD named name in its storage version and
// then records that in status.storedVersions. It waits until the API server announces
// (in discovery's storage version hash) that it writes in that version, so no object
// written before the switch is missed. Each object gets an empty merge patch: the API
// server decodes it, encodes it in the storage version and writes it only when the
// bytes differ, so fields, status and generation stay as they are, an object stored
// in the new version already is not written again, and a tenant's concurrent write
// never conflicts. A storage version changed again meanwhile is an error; running
// Migrate again finishes the work.
func Migrate(ctx context.Context, cfg *rest.Config, name string, opts Options) (Result, error) {
	opts.PageSize, opts.Workers = opts.pageSize(), opts.workers()
	if opts.PollInterval <= 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("CRD client: %w", err)
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	res := Result{From: slices.Clone(crd.Status.StoredVersions), To: apichange.StorageVersion(crd)}
	if !Needed(crd) {
		return res, nil
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: res.To, Resource: crd.Spec.Names.Plural}
	if err := waitForStorage(ctx, crds, gvr, crd.Spec.Names.Kind, opts.PollInterval); err != nil {
		return res, fmt.Errorf("CRD %s: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("dynamic client: %w", err)
	}
	if res.Listed, res.Rewritten, err = rewriteAll(ctx, dyn.Resource(gvr), opts); err != nil {
		return res, fmt.Errorf("rewriting the objects of CRD %s in %s: %w", name, res.To, err)
	}
	if err := recordStored(ctx, crds, name, res.To); err != nil {
		return res, fmt.Errorf("CRD %s: %w", name, err)
	}
	return res, nil
}

// waitForStorage polls discovery until the resource's storage version hash is the one
// of gvr's version: the API server's handler for the CRD writes in it from then on.
func waitForStorage(ctx context.Context, crds apiextensionsclient.Interface, gvr schema.GroupVersionResource, kind string, interval time.Duration) error {
	want := discovery.StorageVersionHash(gvr.Group, gvr.Version, kind)
	var why string
	err := wait.PollUntilContextTimeout(ctx, interval, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var r *metav1.APIResource
		if r, why = discovered(crds.Discovery(), gvr.GroupVersion().String(), gvr.Resource); r == nil {
			return false, nil
		}
		if r.StorageVersionHash != want {
			why = "discovery announces another storage version"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until the API server writes in %s (%s): %w", gvr.Version, why, err)
	}
	return nil
}

// rewriteAll pages through every object and gives each an empty merge patch.
func rewriteAll(ctx context.Context, r dynamic.NamespaceableResourceInterface, opts Options) (listed, rewritten int, err error) {
	return rewriteEach(ctx, opts.Workers, func(ctx context.Context, emit emitFunc) error {
		return pages(ctx, r, opts.PageSize, func(item *unstructured.Unstructured) bool {
			ns, name := item.GetNamespace(), item.GetName()
			return emit(item.GetResourceVersion(), func(ctx context.Context) (*unstructured.Unstructured, error) {
				return r.Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte("{}"), metav1.PatchOptions{})
			})
		})
	})
}

// An emitFunc hands one listed object, by its resourceVersion and how to rewrite it,
// to the workers; false means stop listing.
type emitFunc func(resourceVersion string, rewrite func(context.Context) (*unstructured.Unstructured, error)) bool

// rewriteEach rewrites every object list emits on workers goroutines, counting those
// listed and those whose resourceVersion changed. An object deleted meanwhile is
// skipped; any other error stops it.
func rewriteEach(ctx context.Context, workers int, list func(context.Context, emitFunc) error) (listed, rewritten int, err error) {
	type job struct {
		resourceVersion string
		rewrite         func(context.Context) (*unstructured.Unstructured, error)
	}
	jobs := make(chan job)
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers+1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range workers {
		wg.Go(func() {
			for j := range jobs {
				got, err := j.rewrite(wctx)
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					errs[w] = err
					cancel()
					return
				case got.GetResourceVersion() != j.resourceVersion:
					count.Add(1)
				}
			}
		})
	}
	errs[workers] = list(wctx, func(rv string, rewrite func(context.Context) (*unstructured.Unstructured, error)) bool {
		select {
		case jobs <- job{rv, rewrite}:
			listed++
			return true
		case <-wctx.Done():
			return false
		}
	})
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return listed, int(count.Load()), err
	}
	return listed, int(count.Load()), ctx.Err()
}

// pages lists every object of r, page by page, calling each until it returns false.
func pages(ctx context.Context, r dynamic.ResourceInterface, size int64, each func(*unstructured.Unstructured) bool) error {
	cont := ""
	for {
		page, err := r.List(ctx, metav1.ListOptions{Limit: size, Continue: cont})
		if err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		for i := range page.Items {
			if !each(&page.Items[i]) {
				return nil
			}
		}
		if cont = page.GetContinue(); cont == "" {
			return nil
		}
	}
}

// recordStored sets status.storedVersions to the storage version alone, unless the
// storage version changed while the objects were rewritten.
func recordStored(ctx context.Context, crds apiextensionsclient.Interface, name, storage string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if now := apichange.StorageVersion(crd); now != storage {
			return fmt.Errorf("the storage version moved from %s to %s while objects were rewritten; run the migration again", storage, now)
		}
		crd.Status.StoredVersions = []string{storage}
		if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("recording status.storedVersions [%s]: %w", storage, err)
		}
		return nil
	})
}
