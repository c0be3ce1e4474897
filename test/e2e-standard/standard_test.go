package e2estandard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestStandardMode drives the widget provider through its life on the onboarding
// cluster, asserting on what a tenant and an operator would read.
func TestStandardMode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	harness.LogToTest(t)
	// The local platform denies every AccessRequest of the tenant "denied".
	p := harness.StartStandard(ctx, t, harness.StandardOptions{
		ConfigCRD: configCRD, ServiceCRD: widgetCRD, Scheme: scheme(t),
		TenantNamespace: tenantNamespace, ControlPlanes: []string{"alpha", "beta", "denied"},
		LocalPlatform: localplatform.Options{
			AccessRequestPolicy: func(_ context.Context, ar *clustersv1alpha1.AccessRequest) localplatform.Decision {
				if ar.Labels["openmcp.cloud/onboarding-name"] == "denied" {
					return localplatform.Denied("QuotaExceeded", "tenant has no quota for this service")
				}
				return localplatform.Decision{}
			},
		},
	})
	startRuntime(ctx, t, p)
	ob, wl, pf := p.Onboarding.Client, p.Workload.Client, p.Platform.Platform.Client
	alpha := client.ObjectKey{Namespace: tenantNamespace, Name: "alpha"}
	beta := client.ObjectKey{Namespace: tenantNamespace, Name: "beta"}

	create := func(t *testing.T, key client.ObjectKey, color string) {
		t.Helper()
		w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: widget.WidgetSpec{Color: color}}
		if err := ob.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	setGreeting := func(t *testing.T, greeting string) {
		t.Helper()
		pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}}
		if _, err := controllerutil.CreateOrUpdate(ctx, pf, pc, func() error { pc.Spec.Greeting = greeting; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	workloadConfigMap := func(name string) client.ObjectKey {
		ns, _ := libutils.StableMCPNamespace(name, tenantNamespace)
		return client.ObjectKey{Namespace: ns, Name: "widget"}
	}
	wantConfigMap := func(t *testing.T, name, greeting, color string) {
		t.Helper()
		harness.Eventually(ctx, t, 60*time.Second, name+"'s widget ConfigMap", func(ctx context.Context) error {
			cm := &corev1.ConfigMap{}
			if err := wl.Get(ctx, workloadConfigMap(name), cm); err != nil {
				return err
			}
			if cm.Data["greeting"] != greeting || cm.Data["color"] != color {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
	}

	t.Run("a missing ProviderConfig is reported and recovered from", func(t *testing.T) {
		create(t, alpha, "blue")
		msg := wantReason(ctx, t, ob, alpha, v1alpha1.ReasonProviderConfigMissing)
		t.Logf("message: %s", msg)
		setGreeting(t, "hello")
		wantReady(ctx, t, ob, alpha)
	})

	t.Run("create installs on the workload cluster with MCP access", func(t *testing.T) {
		w := wantReady(ctx, t, ob, alpha)
		if !controllerutil.ContainsFinalizer(w, "widgets.services.open-control-plane.io/finalizer") {
			t.Errorf("finalizer missing: %v", w.Finalizers)
		}
		if w.Status.Identity != "tenants/alpha" {
			t.Errorf("identity = %q", w.Status.Identity)
		}
		if len(w.Status.Resources) != 3 {
			t.Errorf("resources = %+v", w.Status.Resources)
		}
		// The provider's own status fields and label, written by the runtime.
		if len(w.Status.Parts) == 0 || w.Status.Parts[0].Phase != "Installed" {
			t.Errorf("the widget's own status parts = %+v, want its parts with phase Installed", w.Status.Parts)
		}
		if w.Labels[widget.ColorLabel] != "blue" {
			t.Errorf("labels %v, want the provider's %s=blue", w.Labels, widget.ColorLabel)
		}
		wantConfigMap(t, "alpha", "hello", "blue")
		cm := &corev1.ConfigMap{}
		if err := wl.Get(ctx, workloadConfigMap("alpha"), cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data["end-user-serves-deployments"] != "true" {
			t.Errorf("the provider was told the ControlPlane serves no Deployments (%v)", cm.Data)
		}
		if cm.Data["server-path"] != "" || cm.Data["server-host"] == "" || cm.Data["server-port"] == "" {
			t.Errorf("the worker's endpoint by parts %v: want the ControlPlane's host and port, no path", cm.Data)
		}

		// The kubeconfig handed to the worker reaches the tenant's MCP with exactly
		// the declared permissions.
		s := &corev1.Secret{}
		if err := wl.Get(ctx, client.ObjectKey{Namespace: workloadConfigMap("alpha").Namespace, Name: "widget-kubeconfig"}, s); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(p.MCP.Config.Host, "/") {
			t.Errorf("worker kubeconfig points at %s, want the MCP %s", cfg.Host, p.MCP.Config.Host)
		}
		mcpClient, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mcpClient.List(ctx, &corev1.ConfigMapList{}); err != nil {
			t.Errorf("worker cannot list ConfigMaps on its MCP: %v", err)
		}
		if err := mcpClient.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
			t.Errorf("worker listing Secrets on its MCP: want forbidden, got %v", err)
		}

		// openMCP's request conventions.
		mcpNS, _ := libutils.StableMCPNamespace("alpha", tenantNamespace)
		ar := &clustersv1alpha1.AccessRequest{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: "widgets--alpha--mcp"}, ar); err != nil {
			t.Fatalf("MCP AccessRequest: %v", err)
		}
		// Ordered routed: on the Cluster the ControlPlane's ClusterRequest was granted,
		// with its profile's provider, so the operator has nothing to resolve.
		mcpCR := &clustersv1alpha1.ClusterRequest{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: "alpha"}, mcpCR); err != nil {
			t.Fatalf("ControlPlane ClusterRequest: %v", err)
		}
		if ar.Spec.ClusterRef == nil || mcpCR.Status.Cluster == nil || ar.Spec.ClusterRef.NamespacedName() != mcpCR.Status.Cluster.NamespacedName() {
			t.Errorf("MCP AccessRequest names Cluster %+v, want the ControlPlane's %+v", ar.Spec.ClusterRef, mcpCR.Status.Cluster)
		}
		if ar.Spec.RequestRef != nil || ar.Labels[clustersv1alpha1.ProviderLabel] == "" || ar.Labels[clustersv1alpha1.ProfileLabel] == "" {
			t.Errorf("MCP AccessRequest not routed: requestRef %+v, labels %v", ar.Spec.RequestRef, ar.Labels)
		}
		for k, v := range map[string]string{"openmcp.cloud/managed-by": providerName, "openmcp.cloud/onboarding-name": "alpha", "openmcp.cloud/onboarding-namespace": tenantNamespace} {
			if ar.Labels[k] != v {
				t.Errorf("AccessRequest label %s = %q, want %q", k, ar.Labels[k], v)
			}
		}
		cr := &clustersv1alpha1.ClusterRequest{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: "widgets--alpha--wl"}, cr); err != nil {
			t.Fatalf("workload ClusterRequest: %v", err)
		}
		if cr.Spec.Purpose != clustersv1alpha1.PURPOSE_WORKLOAD {
			t.Errorf("ClusterRequest purpose %q", cr.Spec.Purpose)
		}
		wlAR := &clustersv1alpha1.AccessRequest{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: "widgets--alpha--wl"}, wlAR); err != nil {
			t.Fatalf("workload AccessRequest: %v", err)
		}
		if wlAR.Spec.RequestRef != nil || wlAR.Spec.ClusterRef == nil || cr.Status.Cluster == nil || wlAR.Spec.ClusterRef.NamespacedName() != cr.Status.Cluster.NamespacedName() {
			t.Errorf("workload AccessRequest: requestRef %+v, clusterRef %+v; want only the Cluster its ClusterRequest was granted, %+v",
				wlAR.Spec.RequestRef, wlAR.Spec.ClusterRef, cr.Status.Cluster)
		}
	})

	t.Run("a ProviderConfig change reaches every object", func(t *testing.T) {
		create(t, beta, "green")
		wantReady(ctx, t, ob, beta)
		setGreeting(t, "bonjour")
		wantConfigMap(t, "alpha", "bonjour", "blue")
		wantConfigMap(t, "beta", "bonjour", "green")
	})

	t.Run("the provider reads the platform cluster: a pull secret copied to each tenant", func(t *testing.T) {
		if err := pf.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry"},
			Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}}); err != nil {
			t.Fatal(err)
		}
		harness.Patch(ctx, t, pf, client.ObjectKey{Name: providerName}, func(c *widget.WidgetConfig) { c.Spec.PullSecret = "registry" })
		for _, name := range []string{"alpha", "beta"} {
			harness.Eventually(ctx, t, 60*time.Second, name+"'s copy of the pull secret", func(ctx context.Context) error {
				s := &corev1.Secret{}
				if err := wl.Get(ctx, client.ObjectKey{Namespace: workloadConfigMap(name).Namespace, Name: "widget-pull-secret"}, s); err != nil {
					return err
				}
				if string(s.Data[".dockerconfigjson"]) != `{"auths":{}}` {
					return fmt.Errorf("data %v", s.Data)
				}
				return nil
			})
		}
	})

	t.Run("an invalid ProviderConfig is reported and nothing is torn down", func(t *testing.T) {
		setGreeting(t, " ")
		msg := wantReason(ctx, t, ob, beta, v1alpha1.ReasonProviderConfigInvalid)
		if msg == "" {
			t.Error("no message")
		}
		wantConfigMap(t, "beta", "bonjour", "green")
		setGreeting(t, "bonjour")
		wantReady(ctx, t, ob, beta)
	})

	t.Run("a denied access shows on the object", func(t *testing.T) {
		denied := client.ObjectKey{Namespace: tenantNamespace, Name: "denied"}
		create(t, denied, "black")
		msg := wantReason(ctx, t, ob, denied, v1alpha1.ReasonAccessDenied)
		if want := "tenant has no quota for this service"; !strings.Contains(msg, want) {
			t.Errorf("message %q does not carry the platform's reason %q", msg, want)
		}
	})

	t.Run("a provider error becomes a condition and is retried", func(t *testing.T) {
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Fail = "the widget factory is closed" })
		msg := wantReason(ctx, t, ob, alpha, v1alpha1.ReasonProviderError)
		if msg != "the widget factory is closed" {
			t.Errorf("message %q", msg)
		}
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Fail = "" })
		wantReady(ctx, t, ob, alpha)
	})

	t.Run("a terminal provider error becomes a condition in the provider's words", func(t *testing.T) {
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Fail, w.Spec.Terminal = `color "plaid" is not offered`, true })
		if msg := wantReason(ctx, t, ob, alpha, v1alpha1.ReasonProviderRejected); msg != `color "plaid" is not offered` {
			t.Errorf("message %q", msg)
		}
		// A change of the object brings it back.
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Fail, w.Spec.Terminal = "", false })
		wantReady(ctx, t, ob, alpha)
	})

	t.Run("a panicking provider shows on its object and the runtime serves the others", func(t *testing.T) {
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Panic = "nil map in the widget factory" })
		if msg := wantReason(ctx, t, ob, alpha, v1alpha1.ReasonProviderPanic); !strings.Contains(msg, "nil map in the widget factory") {
			t.Errorf("message %q does not carry the panic's value", msg)
		}
		// The same process still serves beta: a change of beta's reaches its workload.
		harness.Patch(ctx, t, ob, beta, func(w *widget.Widget) { w.Spec.Color = "orange" })
		wantConfigMap(t, "beta", "bonjour", "orange")
		harness.Patch(ctx, t, ob, beta, func(w *widget.Widget) { w.Spec.Color = "green" })
		wantConfigMap(t, "beta", "bonjour", "green")
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Panic = "" })
		wantReady(ctx, t, ob, alpha)
	})

	t.Run("operation annotation ignore and reconcile", func(t *testing.T) {
		harness.Patch(ctx, t, ob, beta, func(w *widget.Widget) {
			w.Annotations = map[string]string{"openmcp.cloud/operation": "ignore"}
			w.Spec.Color = "red"
		})
		// A fan-out that demonstrably reached alpha must have skipped beta.
		setGreeting(t, "hallo")
		wantConfigMap(t, "alpha", "hallo", "blue")
		cm := &corev1.ConfigMap{}
		if err := wl.Get(ctx, workloadConfigMap("beta"), cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data["color"] != "green" || cm.Data["greeting"] != "bonjour" {
			t.Errorf("ignored object was reconciled: %v", cm.Data)
		}
		harness.Patch(ctx, t, ob, beta, func(w *widget.Widget) {
			w.Annotations = map[string]string{"openmcp.cloud/operation": "reconcile"}
		})
		wantConfigMap(t, "beta", "hallo", "red")
		harness.Eventually(ctx, t, 30*time.Second, "reconcile annotation removed", func(ctx context.Context) error {
			w := &widget.Widget{}
			if err := ob.Get(ctx, beta, w); err != nil {
				return err
			}
			if v, ok := w.Annotations["openmcp.cloud/operation"]; ok {
				return fmt.Errorf("annotation still %q", v)
			}
			return nil
		})
	})

	t.Run("delete removes the install, then the accesses, then the finalizer", func(t *testing.T) {
		if err := ob.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: alpha.Namespace, Name: alpha.Name}}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 90*time.Second, "alpha gone", func(ctx context.Context) error {
			return localenv.Gone(ob.Get(ctx, alpha, &widget.Widget{}))
		})
		if err := wl.Get(ctx, workloadConfigMap("alpha"), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("workload ConfigMap: want gone, got %v", err)
		}
		sel := client.MatchingLabels{"openmcp.cloud/managed-by": providerName, "openmcp.cloud/onboarding-name": "alpha"}
		ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
		if err := pf.List(ctx, ars, sel); err != nil {
			t.Fatal(err)
		}
		if err := pf.List(ctx, crs, sel); err != nil {
			t.Fatal(err)
		}
		if len(ars.Items)+len(crs.Items) != 0 {
			t.Errorf("left behind: %d AccessRequests, %d ClusterRequests", len(ars.Items), len(crs.Items))
		}
		wantReady(ctx, t, ob, beta)
	})
}
