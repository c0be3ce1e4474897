package e2efaults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestControlPlaneNotFound: standard-mode objects the platform cannot serve as they
// are. One named after no ControlPlane says so (ControlPlaneNotFound) instead of
// waiting for the platform for ever, orders nothing, and leaves nothing when deleted,
// not even a platform namespace. One created before its ControlPlane is served once
// the ControlPlane exists. One whose access the platform holds back shows the
// platform's reason. Each ends counting what is left of it.
func TestControlPlaneNotFound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const (
		held    = "held"
		holdMsg = "a platform administrator must approve this tenant"
	)
	e := startEnv(ctx, t, envOptions{controlPlanes: []string{held}, platform: localplatform.Options{
		AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) localplatform.Decision {
			if ar.Labels["openmcp.cloud/onboarding-name"] == held && strings.HasSuffix(ar.Name, "--mcp") {
				return localplatform.Decision{DelayUntil: time.Now().Add(time.Hour), Reason: "AwaitingApproval", Message: holdMsg}
			}
			return localplatform.Decision{}
		},
	}})
	e.startRuntime(ctx, t)
	platformNamespace := func(controlPlane string) string {
		return cluster.StandardIdentity(tenantNamespace, controlPlane).TenantNamespace()
	}

	t.Run("an object named after no ControlPlane says so and leaves nothing", func(t *testing.T) {
		key := e.createWidget(ctx, t, "nosuchcp")
		start := time.Now()
		msg := e.wantReason(ctx, t, key, v1alpha1.ReasonControlPlaneNotFound)
		t.Logf("%s after %v: %s", v1alpha1.ReasonControlPlaneNotFound, time.Since(start).Round(100*time.Millisecond), msg)
		for _, want := range []string{"ControlPlane tenants/nosuchcp does not exist", "ClusterRequest " + platformNamespace("nosuchcp") + "/nosuchcp"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
		// Nothing was ordered, so no namespace was created for the requests.
		if err := e.pf.Get(ctx, client.ObjectKey{Name: platformNamespace("nosuchcp")}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("platform namespace %s: want none, got %v", platformNamespace("nosuchcp"), err)
		}
		e.deleteWidget(ctx, t, key)
		e.wantNoLeftovers(ctx, t, "nosuchcp", nil, 5*time.Second)
		if err := e.pf.Get(ctx, client.ObjectKey{Name: platformNamespace("nosuchcp")}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("platform namespace %s after the deletion: want none, got %v", platformNamespace("nosuchcp"), err)
		}
	})

	t.Run("an object created before its ControlPlane is served once it exists", func(t *testing.T) {
		key := e.createWidget(ctx, t, "latecp")
		e.wantReason(ctx, t, key, v1alpha1.ReasonControlPlaneNotFound)
		if err := e.lp.RegisterControlPlane(ctx, "latecp", tenantNamespace, "mcp"); err != nil {
			t.Fatal(err)
		}
		registered := time.Now()
		e.wantReady(ctx, t, key)
		t.Logf("Ready %v after the ControlPlane was registered", time.Since(registered).Round(100*time.Millisecond))
		ids := e.accessIDs(ctx, t, "latecp")
		if len(ids) != 2 {
			t.Fatalf("access IDs %v, want the MCP's and the workload's", ids)
		}
		e.deleteWidget(ctx, t, key)
		e.wantNoLeftovers(ctx, t, "latecp", ids, 5*time.Second)
	})

	t.Run("an access the platform holds back shows the platform's reason", func(t *testing.T) {
		key := e.createWidget(ctx, t, held)
		harness.Eventually(ctx, t, 30*time.Second, "the platform's reason on "+held, func(ctx context.Context) error {
			w := &widget.Widget{}
			if err := e.ob.Get(ctx, key, w); err != nil {
				return err
			}
			c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Reason != v1alpha1.ReasonWaitingForAccess || !strings.Contains(c.Message, "AwaitingApproval: "+holdMsg) {
				return fmt.Errorf("condition %+v", c)
			}
			t.Logf("message: %s", c.Message)
			return nil
		})
		ids := e.accessIDs(ctx, t, held)
		e.deleteWidget(ctx, t, key)
		e.wantNoLeftovers(ctx, t, held, ids, 5*time.Second)
	})
}
