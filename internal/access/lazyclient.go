package access

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/openmcp-project/kcp-serviceprovider/internal/restmapping"
)

// lazyClient is a client that is built on its first use. The runtime keeps an Access
// per tenant and cluster for as long as the grant holds, and most providers use some
// of them only (a kubeconfig handed to a worker needs no client): a built
// controller-runtime client holds a codec factory, a discovery-backed REST mapper and
// a REST client per resource, about 17 KB a tenant before it is used (heap profiles
// at 500 workspaces, docs/design/scale.md).
type lazyClient struct {
	scheme *runtime.Scheme
	build  func() (client.Client, error)

	once sync.Once
	c    client.Client
	err  error
}

var _ client.Client = &lazyClient{}

// newLazyClient defers building the client of cfg. The HTTP client is built at once,
// so that a kubeconfig the transport cannot use is refused where it is read. Its REST
// mappings follow the cluster (package restmapping): the client lives as long as the
// grant, while the kinds the cluster serves come and go.
func newLazyClient(cfg *rest.Config, scheme *runtime.Scheme) (*lazyClient, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	if scheme == nil {
		scheme = clientgoscheme.Scheme // client.New's default
	}
	return &lazyClient{scheme: scheme, build: func() (client.Client, error) {
		return restmapping.NewClient(cfg, hc, scheme, restmapping.Options{})
	}}, nil
}

// Lazy returns a client that build makes on its first use (once; its error answers
// every call), for a client that most of its holders never use. scheme answers
// Scheme and GroupVersionKindFor without building; it must be build's scheme.
func Lazy(scheme *runtime.Scheme, build func() (client.Client, error)) client.Client {
	return &lazyClient{scheme: scheme, build: build}
}

func (l *lazyClient) client() (client.Client, error) {
	l.once.Do(func() { l.c, l.err = l.build() })
	return l.c, l.err
}

func (l *lazyClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

func (l *lazyClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.List(ctx, list, opts...)
}

func (l *lazyClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Apply(ctx, obj, opts...)
}

func (l *lazyClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Create(ctx, obj, opts...)
}

func (l *lazyClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Delete(ctx, obj, opts...)
}

func (l *lazyClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Update(ctx, obj, opts...)
}

func (l *lazyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, patch, opts...)
}

func (l *lazyClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.DeleteAllOf(ctx, obj, opts...)
}

func (l *lazyClient) Status() client.SubResourceWriter { return l.SubResource("status") }

func (l *lazyClient) SubResource(subResource string) client.SubResourceClient {
	c, err := l.client()
	if err != nil {
		return failedSubResource{err}
	}
	return c.SubResource(subResource)
}

func (l *lazyClient) Scheme() *runtime.Scheme { return l.scheme }

func (l *lazyClient) RESTMapper() meta.RESTMapper {
	c, err := l.client()
	if err != nil {
		return failedMapper{err}
	}
	return c.RESTMapper()
}

func (l *lazyClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, l.scheme)
}

func (l *lazyClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	c, err := l.client()
	if err != nil {
		return false, err
	}
	return c.IsObjectNamespaced(obj)
}

// failedSubResource and failedMapper answer every call with the error that building
// the client met, for the methods of client.Client that return no error themselves.
type failedSubResource struct{ err error }

func (f failedSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return f.err
}

func (f failedSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return f.err
}

func (f failedSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return f.err
}

func (f failedSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return f.err
}

func (f failedSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return f.err
}

type failedMapper struct{ err error }

func (f failedMapper) KindFor(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return schema.GroupVersionKind{}, f.err
}

func (f failedMapper) KindsFor(schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return nil, f.err
}

func (f failedMapper) ResourceFor(schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return schema.GroupVersionResource{}, f.err
}

func (f failedMapper) ResourcesFor(schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return nil, f.err
}

func (f failedMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, f.err
}

func (f failedMapper) RESTMappings(schema.GroupKind, ...string) ([]*meta.RESTMapping, error) {
	return nil, f.err
}

func (f failedMapper) ResourceSingularizer(string) (string, error) { return "", f.err }
