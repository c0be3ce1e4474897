package e2estandard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/platformservice"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"

	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// TestPlatformServiceMode runs the unchanged widget provider, with the declarations of
// standard mode, as a platform service: one kube-apiserver is the platform cluster and
// the only cluster. The assertions are what an operator reads there.
func TestPlatformServiceMode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	harness.LogToTest(t)
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	// The init job of a platform service installs the Service API's CRD on the platform
	// cluster, next to the ProviderConfig's.
	platform := harness.StartAPIServer(t, harness.PurposePlatform, harness.WithCRDs(widgetCRD, configCRD))
	pf, err := client.New(platform.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "openmcp-system"
	if err := pf.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	platformService, err := builder.ParseDeploymentMode("platform-service")
	if err != nil || !platformService {
		t.Fatalf("ParseDeploymentMode: %v %v", platformService, err)
	}
	rt, err := widgetbuilder.New(providerName, scheme(t), widget.MCPPermissions).
		Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error {
		return rt.Start(ctx, builder.Options{
			Platform: platform.Config, Namespace: ns, RetryInterval: time.Second,
			PlatformService: platformService,
		})
	})

	first := client.ObjectKey{Namespace: ns, Name: "platform"}
	second := client.ObjectKey{Namespace: ns, Name: "second"}
	firstNS := cluster.PlatformIdentity(first.Namespace, first.Name).TenantNamespace()
	secondNS := cluster.PlatformIdentity(second.Namespace, second.Name).TenantNamespace()

	create := func(t *testing.T, key client.ObjectKey, color string) time.Time {
		t.Helper()
		w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: widget.WidgetSpec{Color: color}}
		if err := pf.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	setGreeting := func(t *testing.T, greeting string) {
		t.Helper()
		pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}}
		if _, err := controllerutil.CreateOrUpdate(ctx, pf, pc, func() error { pc.Spec.Greeting = greeting; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	wantConfigMap := func(t *testing.T, tenantNS, greeting, color string) {
		t.Helper()
		harness.Eventually(ctx, t, 60*time.Second, tenantNS+"'s widget ConfigMap", func(ctx context.Context) error {
			cm := &corev1.ConfigMap{}
			if err := pf.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "widget"}, cm); err != nil {
				return err
			}
			if cm.Data["greeting"] != greeting || cm.Data["color"] != color {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
	}
	workerKubeconfig := func(t *testing.T, tenantNS string) *rest.Config {
		t.Helper()
		s := &corev1.Secret{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "widget-kubeconfig"}, s); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// nothingGranted asserts that no ServiceAccount or RBAC of the provider is left for
	// a tenant.
	nothingGranted := func(t *testing.T, tenantNS string) {
		t.Helper()
		sel := client.MatchingLabels{platformservice.TenantLabel: tenantNS}
		for what, list := range map[string]client.ObjectList{
			"ServiceAccounts": &corev1.ServiceAccountList{}, "ClusterRoles": &rbacv1.ClusterRoleList{},
			"ClusterRoleBindings": &rbacv1.ClusterRoleBindingList{}, "Roles": &rbacv1.RoleList{}, "RoleBindings": &rbacv1.RoleBindingList{},
		} {
			if err := pf.List(ctx, list, sel); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(list); n != 0 {
				t.Errorf("%d %s left for %s", n, what, tenantNS)
			}
		}
	}
	gone := func(t *testing.T, key client.ObjectKey) {
		t.Helper()
		harness.Eventually(ctx, t, 90*time.Second, key.String()+" gone", func(ctx context.Context) error {
			return localenv.Gone(pf.Get(ctx, key, &widget.Widget{}))
		})
	}

	t.Run("a missing ProviderConfig is reported and recovered from", func(t *testing.T) {
		create(t, first, "blue")
		wantReason(ctx, t, pf, first, v1alpha1.ReasonProviderConfigMissing)
		setGreeting(t, "hello")
		start := time.Now()
		wantReady(ctx, t, pf, first)
		t.Logf("measured: ProviderConfig created -> Ready in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("create installs on the platform cluster with scoped access", func(t *testing.T) {
		w := wantReady(ctx, t, pf, first)
		if !controllerutil.ContainsFinalizer(w, "widgets.services.open-control-plane.io/finalizer") {
			t.Errorf("finalizer missing: %v", w.Finalizers)
		}
		if w.Status.Identity != "openmcp-system/platform" {
			t.Errorf("identity = %q", w.Status.Identity)
		}
		if len(w.Status.Resources) != 3 {
			t.Errorf("resources = %+v", w.Status.Resources)
		}
		// The workload is the platform cluster: the install is there, in the tenant
		// namespace.
		wantConfigMap(t, firstNS, "hello", "blue")

		// The end-user kubeconfig handed to the worker reaches the platform cluster as a
		// ServiceAccount of the tenant namespace with exactly the declared MCP
		// permissions, not as the runtime.
		cfg := workerKubeconfig(t, firstNS)
		if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(platform.Config.Host, "/") {
			t.Errorf("worker kubeconfig points at %s, want the platform %s", cfg.Host, platform.Config.Host)
		}
		id, err := tokens.DetectIdentity(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:" + firstNS + ":widgets--mcp"; id.Username != want {
			t.Errorf("worker authenticates as %q, want %q", id.Username, want)
		}
		worker, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.List(ctx, &corev1.ConfigMapList{}); err != nil {
			t.Errorf("worker cannot list ConfigMaps: %v", err)
		}
		if err := worker.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
			t.Errorf("worker listing Secrets on the platform: want forbidden, got %v", err)
		}

		// No ControlPlane, no workload cluster: nothing is ordered from the platform.
		ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
		if err := pf.List(ctx, ars); err != nil {
			t.Fatal(err)
		}
		if err := pf.List(ctx, crs); err != nil {
			t.Fatal(err)
		}
		if len(ars.Items)+len(crs.Items) != 0 {
			t.Errorf("platform-service mode ordered %d AccessRequests and %d ClusterRequests", len(ars.Items), len(crs.Items))
		}
	})

	t.Run("a spec change is installed", func(t *testing.T) {
		harness.Patch(ctx, t, pf, first, func(w *widget.Widget) { w.Spec.Color = "red" })
		w := wantReady(ctx, t, pf, first)
		if w.Generation < 2 {
			t.Errorf("generation %d: the patch did not change the spec", w.Generation)
		}
		wantConfigMap(t, firstNS, "hello", "red")
	})

	t.Run("a ProviderConfig change reaches the object", func(t *testing.T) {
		start := time.Now()
		setGreeting(t, "bonjour")
		wantConfigMap(t, firstNS, "bonjour", "red")
		t.Logf("measured: ProviderConfig change -> installed in %s", time.Since(start).Round(time.Millisecond))
		wantReady(ctx, t, pf, first)
	})

	t.Run("a provider error becomes a condition and is retried", func(t *testing.T) {
		harness.Patch(ctx, t, pf, first, func(w *widget.Widget) { w.Spec.Fail = "the widget factory is closed" })
		if msg := wantReason(ctx, t, pf, first, v1alpha1.ReasonProviderError); msg != "the widget factory is closed" {
			t.Errorf("message %q", msg)
		}
		harness.Patch(ctx, t, pf, first, func(w *widget.Widget) { w.Spec.Fail = "" })
		wantReady(ctx, t, pf, first)
	})

	t.Run("a second object waits while the first is served", func(t *testing.T) {
		create(t, second, "green")
		msg := wantReason(ctx, t, pf, second, v1alpha1.ReasonNotSingleton)
		if !strings.Contains(msg, first.String()) {
			t.Errorf("message %q does not name the active object %s", msg, first)
		}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: secondNS, Name: "widget"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the waiting object was installed: %v", err)
		}
	})

	t.Run("delete removes the install and every grant, then promotes the next", func(t *testing.T) {
		oldWorker := workerKubeconfig(t, firstNS)
		start := time.Now()
		if err := pf.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: first.Namespace, Name: first.Name}}); err != nil {
			t.Fatal(err)
		}
		gone(t, first)
		t.Logf("measured: delete -> object gone in %s", time.Since(start).Round(time.Millisecond))
		for _, name := range []string{"widget", "widget-kubeconfig"} {
			var obj client.Object = &corev1.ConfigMap{}
			if name == "widget-kubeconfig" {
				obj = &corev1.Secret{}
			}
			if err := pf.Get(ctx, client.ObjectKey{Namespace: firstNS, Name: name}, obj); !apierrors.IsNotFound(err) {
				t.Errorf("%s: want gone, got %v", name, err)
			}
		}
		nothingGranted(t, firstNS)

		// The successor starts only now that the predecessor's cleanup is done.
		w := wantReady(ctx, t, pf, second)
		t.Logf("measured: delete -> successor Ready in %s", time.Since(start).Round(time.Millisecond))
		if w.Status.Identity != second.String() {
			t.Errorf("identity = %q", w.Status.Identity)
		}

		// The token the worker held is revoked with its ServiceAccount (allowing for the
		// API server's token authentication cache).
		worker, err := client.New(oldWorker, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 60*time.Second, "the released token is rejected", func(ctx context.Context) error {
			if err := worker.List(ctx, &corev1.ConfigMapList{}); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("want unauthorized, got %v", err)
			}
			return nil
		})
		t.Logf("measured: delete -> released token rejected in %s", time.Since(start).Round(time.Millisecond))
		wantConfigMap(t, secondNS, "bonjour", "green")
	})

	t.Run("deleting the last object leaves nothing of the provider", func(t *testing.T) {
		if err := pf.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: second.Namespace, Name: second.Name}}); err != nil {
			t.Fatal(err)
		}
		gone(t, second)
		if err := pf.Get(ctx, client.ObjectKey{Namespace: secondNS, Name: "widget"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap: want gone, got %v", err)
		}
		nothingGranted(t, secondNS)
		// Nothing of the provider anywhere on the platform cluster, whatever the tenant.
		sel := client.MatchingLabels{"openmcp.cloud/managed-by": providerName}
		sas, crs := &corev1.ServiceAccountList{}, &rbacv1.ClusterRoleList{}
		if err := pf.List(ctx, sas, sel); err != nil {
			t.Fatal(err)
		}
		if err := pf.List(ctx, crs, sel); err != nil {
			t.Fatal(err)
		}
		if len(sas.Items)+len(crs.Items) != 0 {
			t.Errorf("left behind: %d ServiceAccounts, %d ClusterRoles", len(sas.Items), len(crs.Items))
		}
	})
}
