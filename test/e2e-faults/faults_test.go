package e2efaults

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestWorkloadUnreachableForAWhile: the workload cluster's API stops answering (its
// connections dropped, new ones closed) while a tenant changes its object. The object
// says why it is not Ready, the runtime keeps retrying, and the change is installed
// once the API answers again; the tenant's accesses are neither released nor ordered
// twice meanwhile.
//
// Not parallel: it counts failed reconciles in the process's metrics, which every
// runtime of this package writes under the same provider name.
func TestWorkloadUnreachableForAWhile(t *testing.T) {
	ctx := t.Context()
	e := startEnv(ctx, t, envOptions{controlPlanes: []string{"alpha"}, proxyWorkload: true})
	e.startRuntime(ctx, t)
	key := e.createWidget(ctx, t, "alpha")
	e.wantReady(ctx, t, key)
	want := count{AccessRequests: 2, ClusterRequests: 1, WorkloadServiceAccounts: 1, MCPServiceAccounts: 1}
	e.wantCounts(ctx, t, providerName, want, 30*time.Second)

	failedBefore := e.reconcileErrors(ctx, t)
	e.workloadProxy.Cut()
	e.patchWidget(ctx, t, key, func(w *widget.Widget) { w.Spec.Color = "green" })
	msg := e.wantReason(ctx, t, key, v1alpha1.ReasonProviderError)
	if !strings.Contains(msg, "127.0.0.1") {
		t.Errorf("message %q does not say which server failed", msg)
	}
	// A while of failing, then the API is back.
	harness.Eventually(ctx, t, 30*time.Second, "retries while unreachable", func(ctx context.Context) error {
		if n := e.reconcileErrors(ctx, t) - failedBefore; n < 3 {
			return fmt.Errorf("%d failed reconciles so far", n)
		}
		return nil
	})
	e.workloadProxy.Restore()
	e.wantReady(ctx, t, key)
	e.wantWorkloadColor(ctx, t, "alpha", "green")
	if got := e.counts(ctx, t, providerName); got != want {
		t.Errorf("accesses after the outage: %+v, want %+v", got, want)
	}
}

// TestDeniedAccessOrderedAgain: the platform denies a tenant's access (say, its quota
// is used up). The object shows the platform's reason; after a backoff the runtime
// withdraws the denied request and orders it again, so once the platform would grant
// it the object becomes Ready, with one request of each kind.
func TestDeniedAccessOrderedAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var deny atomic.Bool
	deny.Store(true)
	e := startEnv(ctx, t, envOptions{controlPlanes: []string{"alpha"}, platform: localplatform.Options{
		AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) localplatform.Decision {
			// Only the workload cluster's access ("--wl"); end-user access is granted.
			if deny.Load() && strings.HasSuffix(ar.Name, "--wl") {
				return localplatform.Decision{Deny: true, Reason: "QuotaExceeded", Message: "tenant has no workload quota left"}
			}
			return localplatform.Decision{}
		},
	}})
	e.startRuntime(ctx, t)
	key := e.createWidget(ctx, t, "alpha")
	msg := e.wantReason(ctx, t, key, v1alpha1.ReasonWorkloadDenied)
	if !strings.Contains(msg, "tenant has no workload quota left") || !strings.Contains(msg, "ordering it again at") {
		t.Errorf("message %q does not give the platform's reason and when the runtime tries again", msg)
	}
	deny.Store(false)
	e.wantReady(ctx, t, key)
	e.wantCounts(ctx, t, providerName, count{AccessRequests: 2, ClusterRequests: 1, WorkloadServiceAccounts: 1, MCPServiceAccounts: 1}, 30*time.Second)
}

// TestWorkloadNeverGranted: the platform leaves a tenant's workload access Pending (as
// openMCP's controllers do with a request they cannot serve: they write no Denied).
// Once the grant timeout passes, the object says it is not granted, with what the
// platform says, and the runtime asks the platform again (the operation annotation),
// once per timeout, without withdrawing the request; when the platform can serve it,
// the object becomes Ready. Another tenant is served meanwhile.
func TestWorkloadNeverGranted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	withheldNS := cluster.StandardIdentity(tenantNamespace, "alpha").TenantNamespace()
	var withhold atomic.Bool
	var asked atomic.Int32
	withhold.Store(true)
	e := startEnv(ctx, t, envOptions{controlPlanes: []string{"alpha", "beta"}, platform: localplatform.Options{
		AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) localplatform.Decision {
			if ar.Namespace != withheldNS || !strings.HasSuffix(ar.Name, "--wl") {
				return localplatform.Decision{}
			}
			asked.Add(1)
			if withhold.Load() {
				return localplatform.Decision{DelayUntil: time.Now().Add(time.Hour), Reason: "NoCapacity", Message: "no workload capacity left in the region"}
			}
			return localplatform.Decision{}
		},
	}, runtime: builder.Options{GrantTimeout: 3 * time.Second}})
	e.startRuntime(ctx, t)
	alpha, beta := e.createWidget(ctx, t, "alpha"), e.createWidget(ctx, t, "beta")
	e.wantReady(ctx, t, beta)
	msg := e.wantReason(ctx, t, alpha, v1alpha1.ReasonWorkloadNotGranted)
	for _, want := range []string{"no workload capacity left in the region", "asked it again at", "AccessRequest " + withheldNS + "/"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// The platform is asked again: the pending request is reconciled once more.
	askedBefore := asked.Load()
	harness.Eventually(ctx, t, 30*time.Second, "the platform asked again", func(context.Context) error {
		if asked.Load() == askedBefore {
			return fmt.Errorf("the policy was asked %d times, not again", askedBefore)
		}
		return nil
	})
	withhold.Store(false)
	e.wantReady(ctx, t, alpha)
	e.wantCounts(ctx, t, providerName, count{AccessRequests: 4, ClusterRequests: 2, WorkloadServiceAccounts: 2, MCPServiceAccounts: 2}, 30*time.Second)
}

func (e *env) patchWidget(ctx context.Context, t *testing.T, key client.ObjectKey, mutate func(*widget.Widget)) {
	t.Helper()
	w := &widget.Widget{}
	if err := e.ob.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	base := w.DeepCopy()
	mutate(w)
	if err := e.ob.Patch(ctx, w, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// wantWorkloadColor waits for the widget's ConfigMap on the workload cluster.
func (e *env) wantWorkloadColor(ctx context.Context, t *testing.T, controlPlane, color string) {
	t.Helper()
	ns := cluster.StandardIdentity(tenantNamespace, controlPlane).TenantNamespace()
	harness.Eventually(ctx, t, 30*time.Second, "widget ConfigMap "+color, func(ctx context.Context) error {
		cm := &corev1.ConfigMap{}
		if err := e.wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget"}, cm); err != nil {
			return err
		}
		if cm.Data["color"] != color {
			return fmt.Errorf("color %q", cm.Data["color"])
		}
		return nil
	})
}

// reconcileErrors is the runtime's count of failed standard-mode reconciles so far (the
// runtime runs in this process, so its metrics are readable directly).
func (e *env) reconcileErrors(context.Context, *testing.T) int {
	m := &dto.Metric{}
	if err := metrics.ReconcilesTotal.WithLabelValues(providerName, string(cluster.ModeStandard), metrics.ResultError).Write(m); err != nil {
		panic(err)
	}
	return int(m.GetCounter().GetValue())
}
