package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/sharding"
	"github.com/openmcp-project/kcp-serviceprovider/testkit/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	testTTL     = 3 * time.Second
	testRefresh = 200 * time.Millisecond
)

// TestReplicasAgreeAndForgetTheDead runs three replicas' views on a real API server:
// they agree on one responsible replica per workspace; a replica that stops leaves at
// once; one that goes silent (killed) is dropped after the lease duration.
func TestReplicasAgreeAndForgetTheDead(t *testing.T) {
	ctx := t.Context()
	platform := harness.StartAPIServer(t, harness.PurposePlatform)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := harness.NewClient(t, platform.Config, scheme)
	newReplica := func(name string) *sharding.Replicas {
		return sharding.New(sharding.Options{Client: c, Namespace: "default", Name: "widgets-kcp", Replica: name,
			LeaseDuration: testTTL, Probe: testRefresh, Provider: "widgets", Log: logr.Discard()})
	}
	// A replica's coordinator runs its membership; with no workspace engaged it
	// decides nothing else.
	run := func(r *sharding.Replicas) (stop func()) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Coordinator().Runnable().Start(ctx) }()
		return func() { cancel(); <-done }
	}
	a, b := newReplica("a"), newReplica("b")
	stopA, stopB := run(a), run(b)
	defer stopA()
	defer stopB()
	// c joined once and then went silent, as a killed process does: its Lease is
	// what a replica writes, never renewed.
	now := metav1.NowMicro()
	if err := c.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "widgets-kcp-replica-c",
			Labels: map[string]string{"serviceprovider.open-control-plane.io/replica-of": "widgets-kcp-replica"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("c"), LeaseDurationSeconds: ptr.To(int32(testTTL / time.Second)), RenewTime: &now},
	}); err != nil {
		t.Fatal(err)
	}

	wantPeers := func(r *sharding.Replicas, want ...string) {
		t.Helper()
		harness.Eventually(ctx, t, 2*testTTL, fmt.Sprintf("%s sees %v", r.Self(), want), func(context.Context) error {
			got := r.Peers()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("sees %v", got)
			}
			return nil
		})
	}
	wantPeers(a, a.Self(), b.Self(), "c")
	wantPeers(b, a.Self(), b.Self(), "c")

	// No workspace has two responsible replicas, and each of the three gets some.
	share := map[string]int{}
	for i := range 300 {
		ws := fmt.Sprintf("ws-%d", i)
		var who []string
		for _, r := range []*sharding.Replicas{a, b} {
			if r.Responsible(ws) {
				who = append(who, r.Self())
			}
		}
		if len(who) > 1 {
			t.Fatalf("workspace %s: responsible replicas %v, want one", ws, who)
		}
		if len(who) == 0 {
			who = append(who, "c")
		}
		share[who[0]]++
	}
	t.Logf("300 workspaces by responsible replica: %v", share)
	if len(share) != 3 {
		t.Errorf("shares %v: a replica is responsible for nothing", share)
	}
	for who, n := range share {
		if n < 60 {
			t.Errorf("replica %s is responsible for %d of 300 workspaces, want about 100 (shares %v)", who, n, share)
		}
	}

	// The silent replica is dropped once its Lease is ttl old.
	silent := time.Now()
	wantPeers(a, a.Self(), b.Self())
	if d := time.Since(silent); d > testTTL+time.Second {
		t.Errorf("the silent replica was dropped after %s, want within its lease (%s) and a refresh", d, testTTL)
	}

	// A replica that stops deletes its Lease: the others drop it without waiting.
	stopped := time.Now()
	stopB()
	wantPeers(a, a.Self())
	if d := time.Since(stopped); d > testTTL/2 {
		t.Errorf("the stopped replica was dropped after %s, want within a few refreshes (%s)", d, testRefresh)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "widgets-kcp-replica-" + b.Self()}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stopped replica's Lease: %v, want it deleted", err)
	}
	for i := range 50 {
		if ws := fmt.Sprintf("ws-%d", i); !a.Responsible(ws) {
			t.Fatalf("the last replica is not responsible for %s", ws)
		}
	}
}
