package e2estandard

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
)

const providerName = "widgets"

func scheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, widget.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startRuntime runs the widget runtime against the platform until the test ends.
func startRuntime(ctx context.Context, t *testing.T, p *harness.Standard) {
	t.Helper()
	rt, err := widgetbuilder.New(providerName, scheme(t), widget.MCPPermissions).
		Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error {
		return rt.Start(ctx, builder.Options{
			Platform: p.Platform.Platform.Config, Onboarding: p.Onboarding.Config, Namespace: "default",
			RetryInterval: time.Second, WrapTransport: harness.WholeObjectUpdates(t, "widgets"),
		})
	})
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

// startWidgets starts the standard-mode platform with the widget CRDs and the
// ControlPlanes named, logging to the test.
func startWidgets(ctx context.Context, t *testing.T, controlPlanes ...string) *harness.Standard {
	t.Helper()
	harness.LogToTest(t)
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	return harness.StartStandard(ctx, t, harness.StandardOptions{
		ConfigCRD: configCRD, ServiceCRD: widgetCRD, Scheme: scheme(t),
		TenantNamespace: tenantNamespace, ControlPlanes: controlPlanes,
	})
}
