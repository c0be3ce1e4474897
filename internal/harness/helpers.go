package harness

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// Eventually polls cond until it returns nil and fails the test if timeout passes
// first; cond's last error is the failure message.
func Eventually(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	if err := localenv.Poll(ctx, timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Background runs fn until the returned stop is called or the test ends, and fails
// the test if fn returns early with an error.
func Background(ctx context.Context, t testing.TB, what string, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("%s stopped: %v", what, err)
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// NewClient returns a controller-runtime client for cfg with the harness Scheme, or
// with scheme if given.
func NewClient(t testing.TB, cfg *rest.Config, scheme ...*runtime.Scheme) client.Client {
	t.Helper()
	s := Scheme()
	if len(scheme) > 0 {
		s = scheme[0]
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	return c
}

// Patch reads the object at key, applies mutate and sends the difference as a merge
// patch.
func Patch[T client.Object](ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, mutate func(T)) {
	t.Helper()
	obj := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
	if err := c.Get(ctx, key, obj); err != nil {
		t.Fatal(err)
	}
	base := obj.DeepCopyObject().(client.Object)
	mutate(obj)
	if err := c.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// DeleteAndWait deletes obj and waits up to two minutes until it is gone; it returns
// how long that took.
func DeleteAndWait(ctx context.Context, t testing.TB, c client.Client, obj client.Object) time.Duration {
	t.Helper()
	start := time.Now()
	if err := localenv.DeleteAndWait(ctx, c, obj, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// ApplyYAML creates every object of a multi-document YAML file with c (objects that
// exist are left alone).
func ApplyYAML(ctx context.Context, t testing.TB, c client.Client, file string) {
	t.Helper()
	if err := localenv.ApplyFile(ctx, c, file, nil); err != nil {
		t.Fatal(err)
	}
}
