package restmapping

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewClient is client.New on cfg and hc with a Mapper of its own, wrapped by Client.
func NewClient(cfg *rest.Config, hc *http.Client, scheme *runtime.Scheme, opts Options) (client.Client, error) {
	m, err := New(cfg, hc, opts)
	if err != nil {
		return nil, fmt.Errorf("REST mapper: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: hc, Mapper: m})
	if err != nil {
		return nil, err
	}
	return Client(c, m), nil
}

// Client wraps c, whose REST mapper is m, so that a request for a resource the
// server does not serve (any more) renews m and answers "no matches for kind" when
// the kind is gone. The error then also carries the server's answer, so that code
// that took a 404 for "nothing there" still does. Apply and subresource requests
// pass through unchanged.
func Client(c client.Client, m *Mapper) client.Client {
	return &following{Client: c, mapper: m}
}

type following struct {
	client.Client
	mapper *Mapper
}

func (c *following) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.follow(obj, c.Client.Get(ctx, key, obj, opts...))
}

func (c *following) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.follow(list, c.Client.List(ctx, list, opts...))
}

func (c *following) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.follow(obj, c.Client.Create(ctx, obj, opts...))
}

func (c *following) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.follow(obj, c.Client.Update(ctx, obj, opts...))
}

func (c *following) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.follow(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *following) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.follow(obj, c.Client.Delete(ctx, obj, opts...))
}

func (c *following) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.follow(obj, c.Client.DeleteAllOf(ctx, obj, opts...))
}

// follow passes err on, unless it says the server does not serve obj's resource:
// then the mapper forgets what it discovered, and if the kind is gone the answer is
// its "no matches for kind".
func (c *following) follow(obj runtime.Object, err error) error {
	if !Unserved(err) {
		return err
	}
	gvk, gerr := c.GroupVersionKindFor(obj)
	if gerr != nil {
		return err
	}
	if meta.IsListType(obj) {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	c.mapper.Forget()
	if _, merr := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(merr) {
		return fmt.Errorf("%w (the server answered: %w)", merr, err)
	}
	return err
}

// Unserved reports whether err is a server's 404 for a resource it does not serve,
// as opposed to one for an object that does not exist: the API server's mux answers
// an unknown path with a plain-text 404, which client-go marks as an unexpected
// response; an object's 404 is a Status naming the object.
func Unserved(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if d == nil {
		return true
	}
	for _, cause := range d.Causes {
		if cause.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return d.Name == "" && d.Kind == ""
}
