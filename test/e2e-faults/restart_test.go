package e2efaults

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestRuntimeKilledMidCreateAndMidDelete: the runtime process gets SIGKILL once the
// first of a tenant's requests exists, and again once its deletion started; each time
// a new process takes over. Afterwards there is exactly one of each request and access
// ServiceAccount while the object lives, and none after it is gone.
func TestRuntimeKilledMidCreateAndMidDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := startEnv(ctx, t, envOptions{controlPlanes: []string{"alpha"}})
	rt := e.startRuntimeProcess(t)
	key := e.createWidget(ctx, t, "alpha")
	harness.Eventually(ctx, t, 60*time.Second, "first request ordered", func(ctx context.Context) error {
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := e.pf.List(ctx, ars, client.MatchingLabels{openmcpconst.ManagedByLabel: providerName}); err != nil {
			return err
		}
		if len(ars.Items) == 0 {
			return fmt.Errorf("no AccessRequest yet")
		}
		return nil
	})
	rt.Kill(t)
	rt = e.startRuntimeProcess(t)
	e.wantReady(ctx, t, key)
	want := count{AccessRequests: 2, ClusterRequests: 1, WorkloadServiceAccounts: 1, MCPServiceAccounts: 1}
	e.wantCounts(ctx, t, providerName, want, 30*time.Second)

	if err := e.ob.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 60*time.Second, "deletion started", func(ctx context.Context) error {
		if got := e.counts(ctx, t, providerName); got == want {
			return fmt.Errorf("nothing released yet: %+v", got)
		}
		return nil
	})
	rt.Kill(t)
	rt = e.startRuntimeProcess(t)
	e.wantCounts(ctx, t, providerName, count{}, 60*time.Second)
	harness.Eventually(ctx, t, 30*time.Second, "widget gone", func(ctx context.Context) error {
		w := &widget.Widget{}
		if err := e.ob.Get(ctx, key, w); err == nil {
			return fmt.Errorf("still there, status %+v", w.Status)
		}
		return nil
	})
	if err := rt.Failed(); err != nil {
		t.Error(err)
	}
}
