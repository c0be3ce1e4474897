package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// tenantWriter is cluster.PlatformWriterFromCtx: the platform client confined to one
// tenant's platform namespace. controller-runtime's namespaced client refuses an
// object or key naming another namespace, and fills in the tenant's when none is
// named; this adds the refusal of cluster-scoped kinds, which the namespaced client
// passes through. Every refusal happens before a request is sent: the RBAC behind the
// client is cluster-wide (tenant namespaces come and go), so the namespace is kept
// here.
//
// What it creates, updates or patches (from the object, as client.MergeFrom does) gets
// labels, which name the provider and the tenant: the runtime's watches of the kinds
// a provider asked to be woken by (Options.PlatformWatches) select them, and map each
// back to its tenant as they do the tenant's requests.
//
// A read of a kind the runtime watches for the provider comes from that watch's cache
// (which holds what the writer labelled), falling back to the API server when the
// object is not there (written before it was labelled, or not yet seen): the provider
// reads back what it waits on every time it is woken.
type tenantWriter struct {
	client.Client
	base      client.Client
	namespace string
	labels    map[string]string
	cached    platformCache
}

// platformCache is the cache of the watched kinds, and which kinds they are.
type platformCache struct {
	reader client.Reader
	kinds  map[reflect.Type]bool
}

// newPlatformCache returns the cache of the kinds of watched, read through reader.
func newPlatformCache(reader client.Reader, watched []client.Object) platformCache {
	c := platformCache{reader: reader, kinds: map[reflect.Type]bool{}}
	for _, o := range watched {
		c.kinds[reflect.TypeOf(o)] = true
	}
	return c
}

// newTenantWriter confines base, a client whose reads bypass every cache but cached's,
// to namespace, and labels what it writes with labels.
func newTenantWriter(base client.Client, namespace string, labels map[string]string, cached platformCache) client.Client {
	return &tenantWriter{Client: client.NewNamespacedClient(base, namespace), base: base, namespace: namespace, labels: labels, cached: cached}
}

// label adds the writer's labels to obj.
func (w *tenantWriter) label(obj client.Object) {
	if len(w.labels) == 0 {
		return
	}
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, w.labels)
	obj.SetLabels(l)
}

// errApply: an apply configuration's scope cannot be told without its kind's mapping,
// which the namespaced client keeps to itself.
var errApply = errors.New("the platform writer takes objects, not apply configurations: use Patch with client.Apply or client.MergeFrom")

// confined refuses obj unless its kind is namespaced.
func (w *tenantWriter) confined(obj runtime.Object, verb string) error {
	namespaced, err := w.IsObjectNamespaced(obj)
	if err != nil {
		return fmt.Errorf("platform writer: scope of %T: %w", obj, err)
	}
	if !namespaced {
		gvk, _ := w.GroupVersionKindFor(obj)
		return fmt.Errorf("platform writer: cannot %s %s: it is cluster-scoped, and the writer reaches the tenant's namespace %s only", verb, gvk.Kind, w.namespace)
	}
	return nil
}

// then calls call if obj's kind is namespaced, and refuses it otherwise.
func (w *tenantWriter) then(obj runtime.Object, verb string, call func() error) error {
	if err := w.confined(obj, verb); err != nil {
		return err
	}
	return call()
}

func (w *tenantWriter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return w.then(obj, "get", func() error {
		if k := key; w.cached.reader != nil && w.cached.kinds[reflect.TypeOf(obj)] && (k.Namespace == "" || k.Namespace == w.namespace) {
			k.Namespace = w.namespace
			err := w.cached.reader.Get(ctx, k, obj, opts...)
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return w.Client.Get(ctx, key, obj, opts...)
	})
}

// List asks the scope of the list's item kind: the namespaced client asks the list
// kind's, which no REST mapper knows.
func (w *tenantWriter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, w.Scheme())
	if err != nil {
		return fmt.Errorf("platform writer: kind of %T: %w", list, err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	namespaced, err := apiutil.IsGVKNamespaced(gvk, w.RESTMapper())
	if err != nil {
		return fmt.Errorf("platform writer: scope of %s: %w", gvk.Kind, err)
	}
	if !namespaced {
		return fmt.Errorf("platform writer: cannot list %s: it is cluster-scoped, and the writer reaches the tenant's namespace %s only", gvk.Kind, w.namespace)
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if lo.Namespace != "" && lo.Namespace != w.namespace {
		return fmt.Errorf("platform writer: cannot list %s in namespace %s: the writer reaches the tenant's namespace %s only", gvk.Kind, lo.Namespace, w.namespace)
	}
	return w.base.List(ctx, list, append(opts, client.InNamespace(w.namespace))...)
}

func (w *tenantWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	w.label(obj)
	return w.then(obj, "create", func() error { return w.Client.Create(ctx, obj, opts...) })
}

func (w *tenantWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w.label(obj)
	return w.then(obj, "update", func() error { return w.Client.Update(ctx, obj, opts...) })
}

func (w *tenantWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.label(obj)
	return w.then(obj, "patch", func() error { return w.Client.Patch(ctx, obj, patch, opts...) })
}

func (w *tenantWriter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return w.then(obj, "delete", func() error { return w.Client.Delete(ctx, obj, opts...) })
}

func (w *tenantWriter) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return w.then(obj, "delete", func() error { return w.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (w *tenantWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errApply
}

func (w *tenantWriter) Status() client.SubResourceWriter { return w.SubResource("status") }

func (w *tenantWriter) SubResource(name string) client.SubResourceClient {
	return &tenantSubResource{SubResourceClient: w.Client.SubResource(name), w: w, name: name}
}

// tenantSubResource refuses the subresources of cluster-scoped objects, which the
// namespaced client passes through too.
type tenantSubResource struct {
	client.SubResourceClient
	w    *tenantWriter
	name string
}

func (s *tenantSubResource) Get(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
	return s.w.then(obj, "get "+s.name+" of", func() error { return s.SubResourceClient.Get(ctx, obj, sub, opts...) })
}

func (s *tenantSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.w.then(obj, "create "+s.name+" of", func() error { return s.SubResourceClient.Create(ctx, obj, sub, opts...) })
}

func (s *tenantSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.w.then(obj, "update "+s.name+" of", func() error { return s.SubResourceClient.Update(ctx, obj, opts...) })
}

func (s *tenantSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.w.then(obj, "patch "+s.name+" of", func() error { return s.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}

func (s *tenantSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errApply
}
