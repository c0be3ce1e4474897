package e2efaults

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// TestAccessRenewalReachesWorker: with 20 s tokens and the default one-minute poll
// interval, the worker's kubeconfig Secret on the workload cluster is replaced before
// its token expires, every time, and the original token really stops working. Without
// the engine's renewal-bound requeue the Secret would be refreshed only once a minute
// and go stale for ~40 s of every minute.
func TestAccessRenewalReachesWorker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const ttl = 20 * time.Second
	e := startEnv(ctx, t, envOptions{
		controlPlanes: []string{"alpha"},
		platform:      localplatform.Options{TokenTTL: ttl},
	})
	e.startRuntime(ctx, t)
	key := e.createWidget(ctx, t, "alpha")
	e.wantReady(ctx, t, key)

	secretKey := client.ObjectKey{Namespace: cluster.StandardIdentity(tenantNamespace, "alpha").TenantNamespace(), Name: "widget-kubeconfig"}
	workerKubeconfig := func(ctx context.Context) ([]byte, error) {
		s := &corev1.Secret{}
		if err := e.wl.Get(ctx, secretKey, s); err != nil {
			return nil, err
		}
		return s.Data["kubeconfig"], nil
	}
	// authenticates lists ConfigMaps on the end-user cluster as the worker would.
	authenticates := func(ctx context.Context, kcfg []byte) error {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kcfg)
		if err != nil {
			return fmt.Errorf("worker kubeconfig does not parse")
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme(t)})
		if err != nil {
			return err
		}
		return c.List(ctx, &corev1.ConfigMapList{})
	}

	first, err := workerKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := authenticates(ctx, first); err != nil {
		t.Fatalf("first worker kubeconfig: %v", err)
	}
	start := time.Now()
	// Watch three lifetimes (plus the API server's ~10 s token cache): at every look
	// the worker's current kubeconfig works, it changes at least twice, and the first
	// one ends up rejected.
	seen := [][]byte{first}
	var firstRejectedAfter time.Duration
	deadline := start.Add(3*ttl + 15*time.Second)
	for time.Now().Before(deadline) {
		cur, err := workerKubeconfig(ctx)
		if err != nil {
			t.Fatalf("reading worker Secret: %v", err)
		}
		if !bytes.Equal(cur, seen[len(seen)-1]) {
			seen = append(seen, cur)
			t.Logf("worker kubeconfig replaced after %v (version %d)", time.Since(start).Round(100*time.Millisecond), len(seen))
		}
		if err := authenticates(ctx, cur); err != nil {
			t.Fatalf("after %v the worker's current kubeconfig (version %d) does not work: %v", time.Since(start), len(seen), err)
		}
		if firstRejectedAfter == 0 {
			if err := authenticates(ctx, first); apierrors.IsUnauthorized(err) {
				firstRejectedAfter = time.Since(start)
				t.Logf("original token rejected after %v", firstRejectedAfter.Round(100*time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second): // the sampling period of this observation, not synchronisation
		}
	}
	if len(seen) < 3 {
		t.Errorf("worker kubeconfig replaced %d times in %v, want at least 2", len(seen)-1, 3*ttl)
	}
	if firstRejectedAfter == 0 {
		t.Errorf("the original token still works after %v: the test proves nothing", time.Since(start))
	}
	e.wantReady(ctx, t, key)

	// Leave nothing behind.
	w := e.wantReady(ctx, t, key)
	if err := e.ob.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	e.wantCounts(ctx, t, providerName, count{}, 60*time.Second)
}
