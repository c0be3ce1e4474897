package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

const providerName = "widgets"

// WorkloadPermissions are what the widget provider needs on the workload cluster.
var WorkloadPermissions = workload.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "secrets"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
}}}}

// MCPPermissions are what the widget's worker needs on the end-user cluster.
var MCPPermissions = workload.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
}}}}

// env is one standard-mode platform with the runtime running.
type env struct {
	platform, onboarding, workload, mcp *harness.APIServer
	lp                                  *localplatform.Platform
	// Admin clients knowing the widget types.
	pf, ob, wl client.Client
}

func scheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, widget.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startEnv starts the platform, the local platform (denying every AccessRequest of a
// tenant named in deny) and the runtime.
func startEnv(ctx context.Context, t *testing.T, controlPlanes []string, deny map[string]bool) *env {
	t.Helper()
	harness.LogToTest(t)
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	cps := make([]types.NamespacedName, 0, len(controlPlanes))
	for _, cp := range controlPlanes {
		cps = append(cps, types.NamespacedName{Namespace: tenantNamespace, Name: cp})
	}
	p := harness.StartPlatform(ctx, t, localenv.PlatformOptions{
		Clusters: []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		CRDs:     map[string][]*apiextensionsv1.CustomResourceDefinition{localenv.PurposePlatform: {configCRD}, localenv.PurposeOnboarding: {widgetCRD}},
		LocalPlatform: localplatform.Options{
			AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) localplatform.Decision {
				if deny[ar.Labels["openmcp.cloud/onboarding-name"]] {
					return localplatform.Denied("QuotaExceeded", "tenant has no quota for this service")
				}
				return localplatform.Decision{}
			},
		},
		ControlPlanes: cps,
	})
	e := &env{platform: p.Platform, onboarding: p.Onboarding, workload: p.Workload, mcp: p.MCP, lp: p.Local}
	s := scheme(t)
	e.pf, e.ob, e.wl = harness.NewClient(t, e.platform.Config, s), harness.NewClient(t, e.onboarding.Config, s), harness.NewClient(t, e.workload.Config, s)
	if err := e.onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace}}); err != nil {
		t.Fatal(err)
	}

	rt, err := builder.ServiceProvider[*widget.Widget](providerName, scheme(t)).
		For(&widget.Widget{}).
		WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(true, WorkloadPermissions).
		MCPPermissions(MCPPermissions).
		Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error {
		return rt.Start(ctx, builder.Options{
			Platform: e.platform.Config, Onboarding: e.onboarding.Config, Namespace: "default",
			RetryInterval: time.Second,
		})
	})
	return e
}

const tenantNamespace = "tenants"

// readyCondition returns the widget's Ready condition after reading it.
func readyCondition(ctx context.Context, c client.Client, key client.ObjectKey) (*widget.Widget, *metav1.Condition, error) {
	w := &widget.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		return nil, nil, err
	}
	return w, meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady), nil
}

// wantReady waits for status Ready=True at the object's current generation.
func wantReady(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) *widget.Widget {
	t.Helper()
	var got *widget.Widget
	harness.Eventually(ctx, t, 90*time.Second, key.String()+" Ready", func(ctx context.Context) error {
		w, cond, err := readyCondition(ctx, c, key)
		if err != nil {
			return err
		}
		got = w
		if cond == nil || cond.Status != metav1.ConditionTrue || w.Status.ObservedGeneration != w.Generation || w.Status.Phase != v1alpha1.PhaseReady {
			return fmt.Errorf("status %+v", w.Status)
		}
		return nil
	})
	return got
}

// wantReason waits for Ready=False with reason, and returns the message.
func wantReason(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, reason string) string {
	t.Helper()
	var msg string
	harness.Eventually(ctx, t, 90*time.Second, key.String()+" "+reason, func(ctx context.Context) error {
		w, cond, err := readyCondition(ctx, c, key)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("status %+v", w.Status)
		}
		msg = cond.Message
		return nil
	})
	return msg
}
