package sharding

import (
	"context"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
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
