package sharding

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openmcp-project/kcp-serviceprovider/testkit/harness"
)

// TestHeldLeasesRenewWithOneRequest: on a real API server, renewing a held Lease
// reads nothing from the server; a Lease another replica took since is not renewed
// (the update conflicts), and the next read asks the server again and sees the
// new holder.
func TestHeldLeasesRenewWithOneRequest(t *testing.T) {
	ctx := t.Context()
	platform := harness.StartAPIServer(t, harness.PurposePlatform)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	direct, err := client.NewWithWatch(platform.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	counted := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	held := newHeldLeases(counted, func(h string) bool { return h == "me" })
	key := client.ObjectKey{Namespace: "default", Name: "widgets-kcp-ws-one"}

	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To(int32(8)), RenewTime: &now}}
	if err := held.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	renew := func() error {
		l := &coordinationv1.Lease{}
		if err := held.Get(ctx, key, l); err != nil {
			return err
		}
		if *l.Spec.HolderIdentity != "me" {
			return apierrors.NewConflict(coordinationv1.Resource("leases"), key.Name, nil)
		}
		l.Spec.RenewTime = ptr.To(metav1.NowMicro())
		return held.Update(ctx, l)
	}
	for range 3 {
		if err := renew(); err != nil {
			t.Fatalf("renewing a held Lease: %v", err)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("three renewals of a held Lease read it %d times from the server, want 0", n)
	}

	// Another replica takes the Lease over (as after a missed renewal).
	other := &coordinationv1.Lease{}
	if err := direct.Get(ctx, key, other); err != nil {
		t.Fatal(err)
	}
	other.Spec.HolderIdentity = ptr.To("other")
	if err := direct.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := renew(); !apierrors.IsConflict(err) {
		t.Fatalf("renewing a Lease another replica took: got %v, want a conflict", err)
	}
	l := &coordinationv1.Lease{}
	if err := held.Get(ctx, key, l); err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "other" || gets.Load() != 1 {
		t.Errorf("after the conflict: holder %q after %d reads from the server, want %q after 1", *l.Spec.HolderIdentity, gets.Load(), "other")
	}
}

// TestOtherReplicasLeasesReadFromTheWatch: on a real API server, once the watch of
// the Leases has synced, reading the Leases other replicas hold costs no request: a
// live one is seen held, an expired one is taken with one UPDATE. A copy that lost a
// race (another replica wrote the Lease since) makes the UPDATE conflict, and the
// next read of that Lease asks the API server.
func TestOtherReplicasLeasesReadFromTheWatch(t *testing.T) {
	ctx := t.Context()
	platform := harness.StartAPIServer(t, harness.PurposePlatform)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	direct, err := client.NewWithWatch(platform.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	counted := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	lease := func(name string, renewed time.Time) client.ObjectKey {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To(int32(8)),
				RenewTime: ptr.To(metav1.NewMicroTime(renewed))}}
		if err := direct.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		return client.ObjectKeyFromObject(l)
	}
	live, dead := lease("widgets-kcp-ws-live", time.Now()), lease("widgets-kcp-ws-dead", time.Now().Add(-time.Minute))

	watch, err := cache.New(platform.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{"default": {}}})
	if err != nil {
		t.Fatal(err)
	}
	held := newHeldLeases(counted, func(h string) bool { return h == "me" })
	held.watch = watch
	go held.watchLeases(ctx, logr.Discard())
	harness.Eventually(ctx, t, 30*time.Second, "the watch of the Leases synced", func(context.Context) error {
		if !held.synced.Load() {
			return errors.New("not synced")
		}
		return nil
	})

	l := &coordinationv1.Lease{}
	if err := held.Get(ctx, live, l); err != nil || *l.Spec.HolderIdentity != "other" {
		t.Fatalf("the live Lease: %v, %v", l.Spec.HolderIdentity, err)
	}
	if err := held.Get(ctx, dead, l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To("me"), ptr.To(metav1.NowMicro())
	if err := held.Update(ctx, l); err != nil {
		t.Fatalf("taking the expired Lease over: %v", err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("reading two Leases of another replica and taking one read %d times from the server, want 0", n)
	}

	// The live Lease is renewed by its holder after this replica read it.
	stale := &coordinationv1.Lease{}
	if err := held.Get(ctx, live, stale); err != nil {
		t.Fatal(err)
	}
	renewed := stale.DeepCopy()
	renewed.Spec.RenewTime = ptr.To(metav1.NowMicro())
	if err := direct.Update(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	stale.Spec.HolderIdentity = ptr.To("me")
	if err := held.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("taking a Lease over from a copy that lost a race: got %v, want a conflict", err)
	}
	if err := held.Get(ctx, live, l); err != nil || gets.Load() != 1 || l.ResourceVersion != renewed.ResourceVersion {
		t.Errorf("after the conflict: %d reads from the server (want 1), resource version %s (want %s), %v",
			gets.Load(), l.ResourceVersion, renewed.ResourceVersion, err)
	}
}
