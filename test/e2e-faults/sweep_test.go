package e2efaults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestOrphanSweep: a tenant object removed behind the runtime's back (finalizer
// stripped while the runtime was down) leaves its AccessRequests and ClusterRequest on
// the platform and the provider's objects on the workload cluster; the sweep calls the
// provider's Delete with the runtime's record of the object, then removes the requests,
// and with them the platform's ServiceAccounts and RBAC on the workload and MCP
// clusters. Another tenant of ours and another provider's requests for a tenant that
// does not exist are untouched.
func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := startEnv(ctx, t, envOptions{
		controlPlanes: []string{"alpha", "beta"},
		runtime:       builder.Options{SweepInterval: 2 * time.Second, SweepAbsences: 2},
	})
	stop := e.startRuntime(ctx, t)
	alpha, beta := e.createWidget(ctx, t, "alpha"), e.createWidget(ctx, t, "beta")
	e.wantReady(ctx, t, alpha)
	e.wantReady(ctx, t, beta)
	// Per tenant: an MCP AccessRequest, a workload ClusterRequest and AccessRequest.
	e.wantCounts(ctx, t, providerName, count{AccessRequests: 4, ClusterRequests: 2, WorkloadServiceAccounts: 2, MCPServiceAccounts: 2}, 30*time.Second)
	alphaIDs := e.accessIDs(ctx, t, "alpha")
	if l := e.leftovers(ctx, t, "alpha", alphaIDs); l.WorkloadObjects != 2 || l.ServiceAccounts != 2 {
		t.Fatalf("alpha before: %+v, want its 2 workload objects and 2 access ServiceAccounts", l)
	}
	// The record the sweep will use sits on the workload AccessRequest; a reconcile that
	// changes nothing does not write it again.
	wlAR := client.ObjectKey{Namespace: cluster.StandardIdentity(tenantNamespace, "beta").TenantNamespace(), Name: "widgets--beta--wl"}
	var recordVersion string
	harness.Eventually(ctx, t, 30*time.Second, "beta's record", func(ctx context.Context) error {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := e.pf.Get(ctx, wlAR, ar); err != nil {
			return err
		}
		if rec := ar.Annotations[engine.RecordAnnotation]; !strings.Contains(rec, `"color":"blue"`) {
			return fmt.Errorf("record %q", rec)
		}
		recordVersion = ar.ResourceVersion
		return nil
	})
	e.patchWidget(ctx, t, beta, func(w *widget.Widget) { w.Annotations = map[string]string{"openmcp.cloud/operation": "reconcile"} })
	harness.Eventually(ctx, t, 30*time.Second, "beta reconciled", func(ctx context.Context) error {
		w := &widget.Widget{}
		if err := e.ob.Get(ctx, beta, w); err != nil {
			return err
		}
		if _, ok := w.Annotations["openmcp.cloud/operation"]; ok {
			return fmt.Errorf("operation annotation still there")
		}
		return nil
	})
	e.wantReady(ctx, t, beta)
	betaAR := &clustersv1alpha1.AccessRequest{}
	if err := e.pf.Get(ctx, wlAR, betaAR); err != nil {
		t.Fatal(err)
	}
	if betaAR.ResourceVersion != recordVersion {
		t.Errorf("beta's workload AccessRequest was written by a reconcile that changed nothing (resourceVersion %s, then %s)", recordVersion, betaAR.ResourceVersion)
	}

	// Another provider's requests, labelled for a tenant that has no object at all.
	const foreign = "gadgets"
	foreignNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}}
	if err := e.pf.Create(ctx, foreignNS); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{
		openmcpconst.ManagedByLabel:           foreign,
		openmcpconst.OnboardingNameLabel:      "ghost",
		openmcpconst.OnboardingNamespaceLabel: tenantNamespace,
	}
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "gadgets--ghost--wl", Namespace: foreignNS.Name, Labels: labels},
		Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD}}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "gadgets--ghost--wl", Namespace: foreignNS.Name, Labels: labels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &commonapi.ObjectReference{Name: cr.Name, Namespace: cr.Namespace},
			Token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}}},
		}}
	// In the order every requester must keep with the real openmcp-operator: the
	// AccessRequest once its ClusterRequest is granted (before that, the operator's
	// access-request controller fails it and backs off).
	for _, req := range []struct {
		obj   client.Object
		phase func() string
	}{{cr, func() string { return cr.Status.Phase }}, {ar, func() string { return ar.Status.Phase }}} {
		if err := e.pf.Create(ctx, req.obj); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 30*time.Second, fmt.Sprintf("foreign %T granted", req.obj), func(ctx context.Context) error {
			if err := e.pf.Get(ctx, client.ObjectKeyFromObject(req.obj), req.obj); err != nil {
				return err
			}
			if req.phase() != clustersv1alpha1.REQUEST_GRANTED {
				return fmt.Errorf("phase %s", req.phase())
			}
			return nil
		})
	}

	// The runtime stops; alpha disappears without its finalizer; the runtime returns.
	stop()
	w := &widget.Widget{}
	if err := e.ob.Get(ctx, alpha, w); err != nil {
		t.Fatal(err)
	}
	w.Finalizers = nil
	if err := e.ob.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := e.ob.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	swept := time.Now()
	e.startRuntime(ctx, t)

	// alpha's workload objects, requests and access go; beta's and the foreign ones stay.
	e.wantNoLeftovers(ctx, t, "alpha", alphaIDs, 60*time.Second)
	t.Logf("orphan's workload objects, requests, ServiceAccounts and RBAC removed %v after the runtime restarted (interval 2s, 2 absences)", time.Since(swept).Round(100*time.Millisecond))
	e.wantCounts(ctx, t, providerName, count{AccessRequests: 2, ClusterRequests: 1, WorkloadServiceAccounts: 2, MCPServiceAccounts: 1}, 5*time.Second)
	e.wantCounts(ctx, t, foreign, count{AccessRequests: 1, ClusterRequests: 1, WorkloadServiceAccounts: 2, MCPServiceAccounts: 1}, 5*time.Second)
	for _, o := range []client.Object{cr, ar} {
		if err := e.pf.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || !o.GetDeletionTimestamp().IsZero() {
			t.Errorf("foreign %T touched: err %v, deletion %v", o, err, o.GetDeletionTimestamp())
		}
	}
	e.wantReady(ctx, t, beta)

	// beta deleted the normal way: only the foreign requests remain.
	betaIDs := e.accessIDs(ctx, t, "beta")
	if err := e.ob.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: beta.Namespace, Name: beta.Name}}); err != nil {
		t.Fatal(err)
	}
	e.wantNoLeftovers(ctx, t, "beta", betaIDs, 60*time.Second)
	e.wantCounts(ctx, t, providerName, count{WorkloadServiceAccounts: 1}, 5*time.Second)
}
