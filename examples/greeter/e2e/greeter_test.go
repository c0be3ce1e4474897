// Package e2e tests the greeter provider end to end in both modes on real Flux: the
// source-controller and helm-controller on the platform cluster install the chart
// pushed to a real OCI registry, under the real openmcp-operator.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// tenantsPerMode is how many tenants each mode serves at once.
const tenantsPerMode = 5

const (
	chartDir   = "../chart/greeter"
	crdName    = "greetings.greeter.example.open-control-plane.io"
	configName = "greeter"
)

// served is one tenant with its Greeter.
type served struct {
	tn  *testkit.Tenant
	obj *v1alpha1.Greeter
}

// fluxWaitTimeout bounds the kit's waits here, above its default of two minutes: a
// tenant's object is gone only when Flux has uninstalled the chart, and Helm waits
// until the chart's CRD is gone from the end-user cluster. The API server's CRD
// finalizer lists the CRD's objects through a watch cache it starts only then;
// until that cache is ready the list fails ("storage is (re)initializing", in
// kcp's log at the deletions here) and the finalizer retries with a growing
// backoff. A deletion outlasted two minutes once in a warm run of 2026-12-06 with
// that error in kcp's log; other projects' e2e suites allow five minutes for a
// CRD's deletion for this reason. The Greeter's Ready condition (reason
// Deleting) names the releases still uninstalling and Flux's word on each, so a
// failure here says which.
const fluxWaitTimeout = 5 * time.Minute

// TestGreeterOnFlux serves five kcp workspaces and five ControlPlanes, each through
// Flux, and checks what the tenants and the platform team would: the chart on every
// target, a version change rolled to all, a version that does not exist shown with
// Flux's reason, and nothing left anywhere after deletion.
func TestGreeterOnFlux(t *testing.T) {
	scheme, err := greeter.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// The test reads the tenants' AccessRequests and the chart's CRD too.
	for _, add := range []func(*runtime.Scheme) error{clustersv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	config := &v1alpha1.GreeterConfig{Spec: v1alpha1.GreeterConfigSpec{ChartVersion: "0.1.0",
		Interval: &metav1.Duration{Duration: time.Minute}}}
	env := testkit.Start(t, testkit.Options{Provider: greeter.Description(), Scheme: scheme, ProviderConfig: config,
		Flux: true, MCPClusters: tenantsPerMode, WaitTimeout: fluxWaitTimeout,
		Prepare: func(t *testing.T, env *testkit.Env) {
			config.Spec.ChartURL = env.PushChart(t, chartDir, "0.1.0")
			env.PushChart(t, chartDir, "0.2.0")
		}})
	ctx := t.Context()

	var all []served
	for i := range tenantsPerMode {
		for _, tn := range []*testkit.Tenant{env.KCPTenant(t, fmt.Sprintf("kcp-%d", i)), env.StandardTenant(t, fmt.Sprintf("cp-%d", i))} {
			g := &v1alpha1.Greeter{ObjectMeta: tn.ObjectMeta(), Spec: v1alpha1.GreeterSpec{Message: "hello " + tn.Name}}
			tn.Create(t, g)
			all = append(all, served{tn, g})
		}
	}
	for _, s := range all {
		s.tn.WaitReady(t, s.obj)
	}

	t.Run("the chart is on every target", func(t *testing.T) {
		for _, s := range all {
			expectChart(ctx, t, env, s, "0.1.0")
		}
	})

	t.Run("a new chart version rolls to every tenant", func(t *testing.T) {
		setChartVersion(ctx, t, env, "0.2.0")
		for _, s := range all {
			waitMessage(t, s, "chart version 0.2.0 is installed")
			expectChart(ctx, t, env, s, "0.2.0")
		}
	})

	t.Run("a chart version that does not exist shows Flux's reason", func(t *testing.T) {
		setChartVersion(ctx, t, env, "9.9.9")
		for _, s := range all {
			s.tn.WaitCondition(t, s.obj, rtv1alpha1.ConditionReady, metav1.ConditionFalse, rtv1alpha1.ReasonProviderError)
			// The tenant reads what Flux says of the tenant's source, reason and message.
			repo := &sourcev1.OCIRepository{}
			if err := env.Platform.Get(ctx, client.ObjectKey{Namespace: s.tn.Identity.TenantNamespace(), Name: greeter.SourceName}, repo); err != nil {
				t.Fatal(err)
			}
			flux := meta.FindStatusCondition(repo.Status.Conditions, fluxmeta.ReadyCondition)
			if c := findReady(s.obj); flux == nil || !strings.Contains(c.Message, flux.Reason) || !strings.Contains(c.Message, "9.9.9") {
				t.Errorf("%s: Ready message %q does not carry Flux's reason (%+v) and the version", s.tn.Name, c.Message, flux)
			}
		}
		// What was installed keeps running meanwhile, and the fix brings everyone back.
		for _, s := range all {
			expectChart(ctx, t, env, s, "0.2.0")
		}
		setChartVersion(ctx, t, env, "0.2.0")
		for _, s := range all {
			waitMessage(t, s, "chart version 0.2.0 is installed")
		}
	})

	t.Run("kcp mode: a renewed workspace token reaches Flux, the old one stops working", func(t *testing.T) {
		s := all[0] // kcp-0
		renewedTokenReachesFlux(ctx, t, env, s)
	})

	t.Run("the orphan sweep removes a gone tenant's HelmRelease through Delete", func(t *testing.T) {
		s := all[1] // cp-0, standard mode
		orphanSweepRemovesRelease(ctx, t, env, s)
		all = slices.Delete(all, 1, 2)
	})

	// The tenants are deleted together, as a platform's are: each deletion waits for
	// Helm's uninstall (about 20 s), so one after another took a minute per three.
	t.Run("deletion waits for Flux and leaves nothing", func(t *testing.T) {
		for _, s := range all {
			t.Run(s.tn.Name, func(t *testing.T) {
				t.Parallel()
				s.tn.DeleteAndExpectNoLeftovers(t, s.obj)
				expectNothingLeft(ctx, t, env, s)
			})
		}
	})
}

// setChartVersion offers a chart version to every tenant, as a platform team does.
func setChartVersion(ctx context.Context, t *testing.T, env *testkit.Env, version string) {
	t.Helper()
	pc := &v1alpha1.GreeterConfig{}
	harness.Eventually(ctx, t, 30*time.Second, "offering chart version "+version, func(ctx context.Context) error {
		if err := env.Platform.Get(ctx, client.ObjectKey{Name: greeter.DefaultName}, pc); err != nil {
			return err
		}
		pc.Spec.ChartVersion = version
		return env.Platform.Update(ctx, pc)
	})
}

func findReady(g *v1alpha1.Greeter) metav1.Condition {
	for _, c := range g.Status.Conditions {
		if c.Type == rtv1alpha1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

// waitMessage waits until the tenant's object is Ready with msg.
func waitMessage(t *testing.T, s served, msg string) {
	t.Helper()
	harness.Eventually(t.Context(), t, 3*time.Minute, fmt.Sprintf("%s Ready with %q", s.tn.Name, msg), func(ctx context.Context) error {
		if err := s.tn.Client.Get(ctx, client.ObjectKeyFromObject(s.obj), s.obj); err != nil {
			return err
		}
		if c := findReady(s.obj); c.Status != metav1.ConditionTrue || c.Message != msg {
			return fmt.Errorf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// targets are where the chart's two halves land for a tenant: the API (CRD and
// ConfigMap) on the end-user cluster, the controller (Deployment and ConfigMap) on the
// end-user cluster in standard mode and in the tenant's namespace on the workload
// cluster in kcp mode.
func targets(env *testkit.Env, s served) (api client.Client, apiNS string, ctrl client.Client, ctrlNS string) {
	if s.tn.Mode == cluster.ModeKCP {
		return s.tn.EndUser, greeter.TargetNamespace, env.Workload, s.tn.Identity.TenantNamespace()
	}
	return s.tn.EndUser, greeter.TargetNamespace, s.tn.EndUser, greeter.TargetNamespace
}

// expectChart checks the chart's objects at version on the tenant's targets.
func expectChart(ctx context.Context, t *testing.T, env *testkit.Env, s served, version string) {
	t.Helper()
	api, apiNS, ctrl, ctrlNS := targets(env, s)
	if err := api.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("%s: the chart's CRD on the end-user cluster: %v", s.tn.Name, err)
	}
	for _, at := range []struct {
		c  client.Client
		ns string
	}{{api, apiNS}, {ctrl, ctrlNS}} {
		cm := &corev1.ConfigMap{}
		if err := at.c.Get(ctx, client.ObjectKey{Namespace: at.ns, Name: configName}, cm); err != nil {
			t.Errorf("%s: the chart's ConfigMap %s/%s: %v", s.tn.Name, at.ns, configName, err)
			continue
		}
		if cm.Data["message"] != "hello "+s.tn.Name || !strings.HasPrefix(cm.Data["chartVersion"], version+"+") {
			t.Errorf("%s: ConfigMap %s/%s = %v, want the tenant's message at chart version %s", s.tn.Name, at.ns, configName, cm.Data, version)
		}
	}
	// Helm waited for it (no disableWait): the pods run on the target's simulated node.
	dep := &appsv1.Deployment{}
	if err := ctrl.Get(ctx, client.ObjectKey{Namespace: ctrlNS, Name: "greeter"}, dep); err != nil {
		t.Errorf("%s: the chart's Deployment %s/greeter: %v", s.tn.Name, ctrlNS, err)
	} else if c := deploymentCondition(dep, appsv1.DeploymentAvailable); c != corev1.ConditionTrue || dep.Status.AvailableReplicas != 1 {
		t.Errorf("%s: the chart's Deployment %s/greeter is not Available: %+v", s.tn.Name, ctrlNS, dep.Status)
	}
	if s.tn.Mode == cluster.ModeKCP {
		sec := &corev1.Secret{}
		if err := ctrl.Get(ctx, client.ObjectKey{Namespace: ctrlNS, Name: greeter.WorkerSecretName}, sec); err != nil || len(sec.Data["kubeconfig"]) == 0 {
			t.Errorf("%s: the worker's kubeconfig beside the controller: %v", s.tn.Name, err)
		}
	}
}

// expectNothingLeft checks that neither the platform nor the targets keep anything of
// the tenant's: no Flux objects or kubeconfig Secrets in its platform namespace, no
// chart objects on its clusters.
func expectNothingLeft(ctx context.Context, t *testing.T, env *testkit.Env, s served) {
	t.Helper()
	ns := s.tn.Identity.TenantNamespace()
	for what, list := range map[string]client.ObjectList{"HelmReleases": &helmv2.HelmReleaseList{}, "OCIRepositories": &sourcev1.OCIRepositoryList{}} {
		if err := env.Platform.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("%s: %d %s left in platform namespace %s", s.tn.Name, n, what, ns)
		}
	}
	secrets := &corev1.SecretList{}
	if err := env.Platform.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{openmcpconst.ManagedByLabel: greeter.DefaultName}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%s: %d runtime Secrets left in platform namespace %s", s.tn.Name, len(secrets.Items), ns)
	}
	api, apiNS, ctrl, ctrlNS := targets(env, s)
	if err := api.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: the chart's CRD is still on the end-user cluster (%v)", s.tn.Name, err)
	}
	// The provider deleted the namespaces the releases went into.
	for _, at := range []struct {
		c  client.Client
		ns string
	}{{api, apiNS}, {ctrl, ctrlNS}} {
		if err := at.c.Get(ctx, client.ObjectKey{Name: at.ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: namespace %s is still there (%v)", s.tn.Name, at.ns, err)
		}
	}
	// The uninstall orphaned the Deployment's ReplicaSet and pods; the namespace
	// controller removed them with the namespace.
	for what, list := range map[string]client.ObjectList{"ReplicaSets": &appsv1.ReplicaSetList{}, "pods": &corev1.PodList{}} {
		if err := ctrl.List(ctx, list, client.InNamespace(ctrlNS)); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("%s: %d %s left in namespace %s", s.tn.Name, n, what, ctrlNS)
		}
	}
	for _, at := range []struct {
		c      client.Client
		ns     string
		obj    client.Object
		remark string
	}{
		{api, apiNS, &corev1.ConfigMap{}, "ConfigMap"},
		{ctrl, ctrlNS, &corev1.ConfigMap{}, "ConfigMap"},
		{ctrl, ctrlNS, &appsv1.Deployment{}, "Deployment"},
		{ctrl, ctrlNS, &corev1.Secret{}, "worker kubeconfig"},
	} {
		name := configName
		if at.remark == "worker kubeconfig" {
			name = greeter.WorkerSecretName
		}
		if err := at.c.Get(ctx, client.ObjectKey{Namespace: at.ns, Name: name}, at.obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the chart's %s %s/%s is still there (%v)", s.tn.Name, at.remark, at.ns, name, err)
		}
	}
}

// platformKubeconfig reads the kubeconfig Secret Flux installs the tenant's API with.
func platformKubeconfig(ctx context.Context, t *testing.T, env *testkit.Env, s served) []byte {
	t.Helper()
	hr := &helmv2.HelmRelease{}
	if err := env.Platform.Get(ctx, client.ObjectKey{Namespace: s.tn.Identity.TenantNamespace(), Name: greeter.APIReleaseName}, hr); err != nil {
		t.Fatal(err)
	}
	ref := hr.Spec.KubeConfig.SecretRef
	sec := &corev1.Secret{}
	if err := env.Platform.Get(ctx, client.ObjectKey{Namespace: hr.Namespace, Name: ref.Name}, sec); err != nil {
		t.Fatal(err)
	}
	return sec.Data[ref.Key]
}

// renewedTokenReachesFlux makes the runtime mint a new workspace token at once, the way
// kcp mode repairs a deleted ServiceAccount (the old account's tokens die with it), and
// checks that the new token reaches the Secret the HelmRelease names and that Flux's
// next forced upgrade succeeds with it.
func renewedTokenReachesFlux(ctx context.Context, t *testing.T, env *testkit.Env, s served) {
	t.Helper()
	old := platformKubeconfig(ctx, t, env, s)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: greeter.DefaultName + "-workload"}}
	if err := s.tn.EndUser.Delete(ctx, sa); err != nil {
		t.Fatalf("deleting the provider's ServiceAccount in the workspace: %v", err)
	}
	harness.Eventually(ctx, t, time.Minute, "a new token in the Secret Flux reads", func(ctx context.Context) error {
		if bytes.Equal(platformKubeconfig(ctx, t, env, s), old) {
			return errors.New("the Secret still holds the old token")
		}
		return nil
	})
	oldConfig, err := clientcmd.RESTConfigFromKubeConfig(old)
	if err != nil {
		t.Fatal(err)
	}
	oldClient, err := client.New(oldConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The server refuses a token of a deleted ServiceAccount once its own view of the
	// accounts has the deletion, which may come a moment after the new token does.
	harness.Eventually(ctx, t, 30*time.Second, "the old token refused", func(ctx context.Context) error {
		if err := oldClient.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(greeter.TargetNamespace)); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("the old token: %v, want Unauthorized", err)
		}
		return nil
	})

	token := time.Now().Format(time.RFC3339Nano)
	hr := &helmv2.HelmRelease{}
	key := client.ObjectKey{Namespace: s.tn.Identity.TenantNamespace(), Name: greeter.APIReleaseName}
	harness.Eventually(ctx, t, 30*time.Second, "asking Flux for a forced upgrade", func(ctx context.Context) error {
		if err := env.Platform.Get(ctx, key, hr); err != nil {
			return err
		}
		if hr.Annotations == nil {
			hr.Annotations = map[string]string{}
		}
		hr.Annotations[fluxmeta.ReconcileRequestAnnotation] = token
		hr.Annotations[fluxmeta.ForceRequestAnnotation] = token
		return env.Platform.Update(ctx, hr)
	})
	harness.Eventually(ctx, t, 2*time.Minute, "Flux's forced upgrade with the new token", func(ctx context.Context) error {
		if err := env.Platform.Get(ctx, key, hr); err != nil {
			return err
		}
		c := meta.FindStatusCondition(hr.Status.Conditions, fluxmeta.ReadyCondition)
		if hr.Status.LastHandledReconcileAt != token || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("handled %q, Ready %+v", hr.Status.LastHandledReconcileAt, c)
		}
		return nil
	})
	waitMessage(t, s, "chart version 0.2.0 is installed")
}

// orphanSweepRemovesRelease removes the finalizer of a tenant's object by hand, so the
// object goes without the deletion sequence; the orphan sweep must then call Delete,
// which removes the tenant's Flux objects, before it revokes the access.
func orphanSweepRemovesRelease(ctx context.Context, t *testing.T, env *testkit.Env, s served) {
	t.Helper()
	ns := s.tn.Identity.TenantNamespace()
	harness.Eventually(ctx, t, 30*time.Second, "removing the finalizer by hand", func(ctx context.Context) error {
		g := &v1alpha1.Greeter{}
		if err := s.tn.Client.Get(ctx, client.ObjectKeyFromObject(s.obj), g); err != nil {
			return err
		}
		g.Finalizers = nil
		return s.tn.Client.Update(ctx, g)
	})
	if err := s.tn.Client.Delete(ctx, s.obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 3*time.Minute, "the sweep removing the gone tenant's Flux objects and access", func(ctx context.Context) error {
		for what, list := range map[string]client.ObjectList{"HelmReleases": &helmv2.HelmReleaseList{}, "OCIRepositories": &sourcev1.OCIRepositoryList{}, "AccessRequests": &clustersv1alpha1.AccessRequestList{}} {
			if err := env.Platform.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			if n := meta.LenList(list); n != 0 {
				return fmt.Errorf("%d %s left in %s", n, what, ns)
			}
		}
		return nil
	})
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) corev1.ConditionStatus {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
