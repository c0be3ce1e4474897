package e2efaults

import (
	"context"
	"fmt"
	"testing"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
)

const (
	providerName    = "widgets"
	tenantNamespace = "tenants"
)

// envOptions vary the standard-mode environment per test.
type envOptions struct {
	// controlPlanes registered with the local platform.
	controlPlanes []string
	// platform options (TokenTTL, policies).
	platform localplatform.Options
	// runtime options besides the cluster configs.
	runtime builder.Options
	// runtimePlatform, when set, is the platform config the runtime uses instead of
	// the admin's (e.g. a ServiceAccount with the shipped role).
	runtimePlatform *rest.Config
	// proxyWorkload puts a proxy (env.workloadProxy) in front of the workload cluster
	// in the kubeconfigs the platform hands out, so a test can make it unreachable.
	proxyWorkload bool
}

// env is one standard-mode platform with the local platform running; the runtime is
// started (and stopped, and started again) by the test.
type env struct {
	platform, onboarding, workload, mcp *harness.APIServer
	lp                                  *localplatform.Platform
	// Admin clients knowing the widget types.
	pf, ob, wl, mcpc client.Client
	opts             envOptions
	// workloadProxy is set with envOptions.proxyWorkload.
	workloadProxy *localenv.Proxy
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

func startEnv(ctx context.Context, t *testing.T, opts envOptions) *env {
	t.Helper()
	harness.LogToTest(t)
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	p := harness.StartStandard(ctx, t, harness.StandardOptions{
		ConfigCRD: configCRD, ServiceCRD: widgetCRD, Scheme: scheme(t),
		TenantNamespace: tenantNamespace, ControlPlanes: opts.controlPlanes,
		LocalPlatform: opts.platform, ProxyWorkload: opts.proxyWorkload,
	})
	e := &env{opts: opts, workloadProxy: p.WorkloadProxy, lp: p.Local,
		platform: p.Platform.Platform, onboarding: p.Onboarding, workload: p.Workload, mcp: p.MCP,
		pf: p.Platform.Platform.Client, ob: p.Onboarding.Client, wl: p.Workload.Client, mcpc: p.MCP.Client,
	}
	if err := e.pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{Greeting: "hello"}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// startRuntime starts the widget runtime and returns a function that stops it
// abruptly: its context is cancelled, nothing is cleaned up (what a SIGKILL leaves,
// minus the process boundary).
func (e *env) startRuntime(ctx context.Context, t *testing.T) (stop func()) {
	t.Helper()
	o := e.opts.runtime
	o.Platform, o.Onboarding = e.platform.Config, e.onboarding.Config
	if e.opts.runtimePlatform != nil {
		o.Platform = e.opts.runtimePlatform
	}
	rt := newRuntime(t)
	o = withTestDefaults(o)
	return harness.Background(ctx, t, "runtime", func(ctx context.Context) error { return rt.Start(ctx, o) })
}

// newRuntime builds the widget runtime every test here runs.
func newRuntime(t testing.TB) *builder.Runtime[*widget.Widget] {
	t.Helper()
	rt, err := widgetbuilder.New(providerName, scheme(t), widget.MCPPermissions).
		Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// withTestDefaults fills what the tests leave open: fast retries, no metrics port.
func withTestDefaults(o builder.Options) builder.Options {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	return o
}

func (e *env) createWidget(ctx context.Context, t *testing.T, name string) client.ObjectKey {
	t.Helper()
	w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: name}, Spec: widget.WidgetSpec{Color: "blue"}}
	if err := e.ob.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(w)
}

// wantReady waits for Ready=True at the object's current generation.
func (e *env) wantReady(ctx context.Context, t *testing.T, key client.ObjectKey) *widget.Widget {
	t.Helper()
	var got *widget.Widget
	harness.Eventually(ctx, t, 90*time.Second, key.String()+" Ready", func(ctx context.Context) error {
		w := &widget.Widget{}
		if err := e.ob.Get(ctx, key, w); err != nil {
			return err
		}
		got = w
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("status %+v", w.Status)
		}
		return nil
	})
	return got
}

// wantReason waits for Ready=False with reason and returns the message.
func (e *env) wantReason(ctx context.Context, t *testing.T, key client.ObjectKey, reason string) string {
	t.Helper()
	var msg string
	harness.Eventually(ctx, t, 90*time.Second, key.String()+" "+reason, func(ctx context.Context) error {
		w := &widget.Widget{}
		if err := e.ob.Get(ctx, key, w); err != nil {
			return err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("status %+v", w.Status)
		}
		msg = c.Message
		return nil
	})
	return msg
}

// count is what the runtime left on the platform and workload clusters for provider.
type count struct {
	AccessRequests, ClusterRequests int
	// ServiceAccounts the platform created for access on the workload and MCP clusters
	// (for every provider).
	WorkloadServiceAccounts, MCPServiceAccounts int
}

// counts counts the requests labelled managed-by=provider on the platform and the
// ServiceAccounts the platform created for them on the workload cluster.
func (e *env) counts(ctx context.Context, t *testing.T, managedBy string) count {
	t.Helper()
	sel := client.MatchingLabels{openmcpconst.ManagedByLabel: managedBy}
	ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
	if err := e.pf.List(ctx, ars, sel); err != nil {
		t.Fatal(err)
	}
	if err := e.pf.List(ctx, crs, sel); err != nil {
		t.Fatal(err)
	}
	// The ServiceAccounts the local platform granted access with; the namespace's
	// default one, which kube-controller-manager creates, is no grant.
	wlSAs, mcpSAs := &corev1.ServiceAccountList{}, &corev1.ServiceAccountList{}
	granted := client.HasLabels{localplatform.AccessIDLabel}
	if err := e.wl.List(ctx, wlSAs, client.InNamespace(localplatform.DefaultAccessNamespace), granted); err != nil {
		t.Fatal(err)
	}
	if err := e.mcpc.List(ctx, mcpSAs, client.InNamespace(localplatform.DefaultAccessNamespace), granted); err != nil {
		t.Fatal(err)
	}
	return count{AccessRequests: len(ars.Items), ClusterRequests: len(crs.Items),
		WorkloadServiceAccounts: len(wlSAs.Items), MCPServiceAccounts: len(mcpSAs.Items)}
}

// wantCounts waits until counts(managedBy) equals want.
func (e *env) wantCounts(ctx context.Context, t *testing.T, managedBy string, want count, timeout time.Duration) {
	t.Helper()
	harness.Eventually(ctx, t, timeout, "leftovers of "+managedBy, func(ctx context.Context) error {
		if got := e.counts(ctx, t, managedBy); got != want {
			return fmt.Errorf("got %+v, want %+v", got, want)
		}
		return nil
	})
}

// leftovers is what is left of one standard-mode tenant.
type leftovers struct {
	// Requests: AccessRequests and ClusterRequests labelled with the tenant's name.
	Requests int
	// ServiceAccounts, Roles (Roles and ClusterRoles) and Bindings (RoleBindings and
	// ClusterRoleBindings) the platform created on the workload and MCP clusters for the
	// access IDs given.
	ServiceAccounts, Roles, Bindings int
	// WorkloadObjects: the widget's ConfigMap and kubeconfig Secret in the tenant's
	// namespace on the workload cluster (the widget provider leaves the namespace).
	WorkloadObjects int
}

// accessIDs are the platform's IDs of the tenant's current AccessRequests: the label
// value of what the local platform created for them on the target clusters.
func (e *env) accessIDs(ctx context.Context, t *testing.T, controlPlane string) []string {
	t.Helper()
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := e.pf.List(ctx, ars, client.MatchingLabels{openmcpconst.ManagedByLabel: providerName, openmcpconst.OnboardingNameLabel: controlPlane}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ar := range ars.Items {
		ids = append(ids, localplatform.AccessID(&ar))
	}
	return ids
}

// leftovers counts what is left of the tenant named controlPlane, for the access IDs
// its requests had.
func (e *env) leftovers(ctx context.Context, t *testing.T, controlPlane string, ids []string) leftovers {
	t.Helper()
	var l leftovers
	sel := client.MatchingLabels{openmcpconst.ManagedByLabel: providerName, openmcpconst.OnboardingNameLabel: controlPlane}
	for _, list := range []client.ObjectList{&clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}} {
		if err := e.pf.List(ctx, list, sel); err != nil {
			t.Fatal(err)
		}
		l.Requests += meta.LenList(list)
	}
	for _, c := range []client.Client{e.wl, e.mcpc} {
		for _, id := range ids {
			byID := client.MatchingLabels{localplatform.AccessIDLabel: id}
			for _, k := range []struct {
				n    *int
				list client.ObjectList
			}{
				{&l.ServiceAccounts, &corev1.ServiceAccountList{}},
				{&l.Roles, &rbacv1.RoleList{}}, {&l.Roles, &rbacv1.ClusterRoleList{}},
				{&l.Bindings, &rbacv1.RoleBindingList{}}, {&l.Bindings, &rbacv1.ClusterRoleBindingList{}},
			} {
				if err := c.List(ctx, k.list, byID); err != nil {
					t.Fatal(err)
				}
				*k.n += meta.LenList(k.list)
			}
		}
	}
	ns := cluster.StandardIdentity(tenantNamespace, controlPlane).TenantNamespace()
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		name := "widget"
		if _, ok := o.(*corev1.Secret); ok {
			name = "widget-kubeconfig"
		}
		err := e.wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
		if err == nil {
			l.WorkloadObjects++
		} else if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	return l
}

// wantNoLeftovers waits until nothing is left of the tenant.
func (e *env) wantNoLeftovers(ctx context.Context, t *testing.T, controlPlane string, ids []string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(ctx, t, timeout, "leftovers of tenant "+controlPlane, func(ctx context.Context) error {
		if got := e.leftovers(ctx, t, controlPlane, ids); got != (leftovers{}) {
			return fmt.Errorf("left: %+v", got)
		}
		return nil
	})
}

// deleteWidget deletes the widget and waits until it is gone.
func (e *env) deleteWidget(ctx context.Context, t *testing.T, key client.ObjectKey) {
	t.Helper()
	if err := e.ob.Delete(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 90*time.Second, key.String()+" gone", func(ctx context.Context) error {
		return localenv.Gone(e.ob.Get(ctx, key, &widget.Widget{}))
	})
}
