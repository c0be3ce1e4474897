package e2ebinary

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
	"path/filepath"
	"syscall"
)

const (
	providerName = "echo"
	providerNS   = "openmcp-system" // the openmcp-operator's namespace, where it runs providers and the samples put the kcp Secret
	initSA       = "sp-echo-init"   // the init Job's ServiceAccount, as the operator names it
	runSA        = "sp-echo"        // the run Deployment's
	providerWS   = "root:providers:echo"
	managedBy    = "services.open-control-plane.io/managed-by"
)

var (
	demo     = client.ObjectKey{Namespace: "default", Name: "demo"}
	echoGVK  = metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "Echo"}
	v1Image  = "ghcr.io/openmcp-project/kcp-serviceprovider/echo-worker:v1.0.0"
	v11Image = "ghcr.io/openmcp-project/kcp-serviceprovider/echo-worker:v1.1.0"
)

// TestBinary is the acceptance test of the binary: built from cmd/kcp-serviceprovider
// and run as the openmcp-operator runs it (init, then run, with --environment,
// --provider-name, --verbosity and POD_NAMESPACE), with exactly the platform RBAC of
// config/rbac, onboarding access requested from the platform, against a real kcp, real
// kube-apiservers for the platform, onboarding, workload and MCP clusters, and the real
// openmcp-operator's scheduler and access-request controller. Tenants apply the sample
// manifests of examples/echo/config.
func TestBinary(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	harness.LogToTest(t)
	testStart := time.Now()
	bin := buildBinary(t, productMain)
	dir := t.TempDir()

	p := harness.StartPlatform(ctx, t, echoPlatform())
	k, platform, mcpSrv := p.KCP, p.Platform, p.MCP
	pf, ob, wl := harness.NewClient(t, platform.Config, echoScheme), harness.NewClient(t, p.Onboarding.Config, echoScheme), harness.NewClient(t, p.Workload.Config, echoScheme)

	// What the openmcp-operator does for a ServiceProvider, but for the Job and
	// Deployment this test runs itself: the init and run ServiceAccounts in its
	// namespace, here bound to config/rbac (not cluster-admin).
	for _, sa := range []string{initSA, runSA} {
		if err := pf.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: providerNS, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "config/rbac/platform.yaml"))
	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "config/deploy/serviceprovider/serviceprovider.yaml"))
	initKubeconfig, _ := tokenKubeconfig(ctx, t, platform.Config, providerNS, initSA, dir, "platform-init.kubeconfig")
	runKubeconfig, _ := tokenKubeconfig(ctx, t, platform.Config, providerNS, runSA, dir, "platform-run.kubeconfig")
	providerClient := harness.NewClient(t, k.ConfigFor(logicalcluster.NewPath(providerWS)), echoScheme)

	operatorArgs := func(cmd string) []string {
		kubeconfig := initKubeconfig
		if cmd == "run" {
			kubeconfig = runKubeconfig
		}
		return []string{cmd, "--environment=e2e", "--verbosity=DEBUG", "--provider-name=" + providerName, "--platform-kubeconfig=" + kubeconfig}
	}
	operatorEnv := []string{"POD_NAMESPACE=" + providerNS, "POD_NAME=e2e"}

	t.Run("init installs the CRDs and registers the Service API", func(t *testing.T) {
		start := time.Now()
		p := startProc(t, "init", bin, operatorArgs("init"), operatorEnv)
		if err := waitExit(t, p, 3*time.Minute); err != nil {
			t.Fatalf("init failed: %v\n%s", err, p.Tail(40))
		}
		t.Logf("init took %s", time.Since(start).Round(100*time.Millisecond))
		for c, name := range map[client.Client]string{ob: "echoes.echo.services.open-control-plane.io", pf: "providerconfigs.echo.services.open-control-plane.io"} {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
				t.Errorf("CRD %s: %v", name, err)
			}
		}
		if err := pf.Get(ctx, client.ObjectKey{Name: "echoes.echo.services.open-control-plane.io"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Service API CRD is on the platform cluster too (%v)", err)
		}
		sp := &providerv1alpha1.ServiceProvider{}
		if err := pf.Get(ctx, client.ObjectKey{Name: providerName}, sp); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(sp.Status.Resources, echoGVK) {
			t.Errorf("ServiceProvider status.resources = %v, want %v", sp.Status.Resources, echoGVK)
		}
		// init's right to write CRDs on the onboarding cluster ends with it.
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := pf.List(ctx, ars, client.InNamespace(providerNS)); err != nil {
			t.Fatal(err)
		}
		for _, ar := range ars.Items {
			if strings.Contains(ar.Name, "onboarding-init") && ar.DeletionTimestamp == nil {
				t.Errorf("init's onboarding AccessRequest %s is left behind", ar.Name)
			}
		}
		// init is idempotent (a re-run Job).
		p = startProc(t, "init-again", bin, operatorArgs("init"), operatorEnv)
		if err := waitExit(t, p, 3*time.Minute); err != nil {
			t.Fatalf("second init failed: %v\n%s", err, p.Tail(40))
		}
	})
	if t.Failed() {
		return
	}

	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "examples/echo/config/samples/echo_v1alpha1_providerconfig_kcp.yaml"))
	ports, err := localenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	probe := "127.0.0.1:" + strconv.Itoa(ports[0])
	runStart := time.Now()
	run := startProc(t, "run", bin, append(operatorArgs("run"),
		"--leader-elect=true",
		"--health-probe-bind-address="+probe,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--metrics-secure=false",
		"--retry-interval=1s",
	), operatorEnv)
	waitHTTP200(ctx, t, run, "http://"+probe+"/readyz", 3*time.Minute)
	t.Logf("run ready after %s", time.Since(runStart).Round(100*time.Millisecond))
	waitExportProvisioned(ctx, t, providerClient)
	t.Logf("kcp mode provisioned after %s", time.Since(runStart).Round(100*time.Millisecond))
	// The platform team sees it on the ProviderConfig (written with config/rbac's rights).
	harness.Eventually(ctx, t, time.Minute, "ProviderConfig KCPMode Active", func(ctx context.Context) error {
		pc := &v1alpha1.ProviderConfig{}
		if err := pf.Get(ctx, client.ObjectKey{Name: providerName}, pc); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(pc.Status.Conditions, rtv1alpha1.ConditionKCPMode); c == nil || c.Status != metav1.ConditionTrue || c.Reason != rtv1alpha1.ReasonKCPActive {
			return fmt.Errorf("KCPMode %+v", c)
		}
		return nil
	})

	// Two tenants bind the export with the sample binding; tenant-b is the neighbour
	// tenant's worker must not reach.
	tenantPath, tenantLC := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "tenant")
	neighbourPath, _ := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "tenant-b")
	tenant, neighbour := harness.NewClient(t, k.ConfigFor(tenantPath), echoScheme), harness.NewClient(t, k.ConfigFor(neighbourPath), echoScheme)
	for _, c := range []client.Client{tenant, neighbour} {
		bindSample(ctx, t, c)
	}
	createSample := func(t *testing.T, c client.Client) time.Time { return createSample(ctx, t, c) }
	wlNamespace := cluster.KCPIdentity(tenantLC.String()).TenantNamespace()
	var workerCfg, workloadAccessCfg *rest.Config

	t.Run("kcp: the tenant's Echo becomes Ready and its worker runs on the workload cluster", func(t *testing.T) {
		created := createSample(t, tenant)
		e := waitEchoReady(ctx, t, tenant, demo)
		t.Logf("kcp: Echo Ready %s after creation", time.Since(created).Round(10*time.Millisecond))
		createSample(t, neighbour)
		waitEchoReady(ctx, t, neighbour, demo)

		if e.Status.Identity != tenantLC.String() {
			t.Errorf("identity %q, want %q", e.Status.Identity, tenantLC)
		}
		if n := len(e.Status.Installed); n != 4 || e.Status.Installed[n-1].Name != echo.InfoConfigMap || e.Status.Installed[n-1].Phase != "Applied" {
			t.Errorf("echo's own status lists %+v, want namespace, kubeconfig, worker and echo-info", e.Status.Installed)
		}
		// Two credentials in the workspace: the provider's and its worker's.
		for _, sa := range []string{providerName + "-workload", providerName + "-worker"} {
			if err := tenant.Get(ctx, client.ObjectKey{Namespace: "default", Name: sa}, &corev1.ServiceAccount{}); err != nil {
				t.Errorf("ServiceAccount %s in the workspace: %v", sa, err)
			}
		}
		if err := tenant.Get(ctx, client.ObjectKey{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("the ConfigMap the provider writes with its own credential: %v", err)
		}
		if c := meta.FindStatusCondition(e.Status.Conditions, echo.ConditionWorkerAvailable); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("WorkerAvailable %+v: the workload cluster runs no pods", c)
		}
		wantWorker(ctx, t, wl, wlNamespace, v1Image, 1, "hello from the echo service")
		workerCfg = secretKubeconfig(ctx, t, wl, client.ObjectKey{Namespace: wlNamespace, Name: echo.KubeconfigSecret}, echo.KubeconfigKey)

		// The runtime's own access to the workload cluster, to check its revocation.
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := pf.List(ctx, ars, client.MatchingLabels{workspaces.LogicalClusterLabel: tenantLC.String()}); err != nil {
			t.Fatal(err)
		}
		if len(ars.Items) != 1 || ars.Items[0].Status.SecretRef == nil {
			t.Fatalf("workload AccessRequests of the tenant: %+v", ars.Items)
		}
		workloadAccessCfg = secretKubeconfig(ctx, t, pf, client.ObjectKey{Namespace: ars.Items[0].Namespace, Name: ars.Items[0].Status.SecretRef.Name}, "kubeconfig")
	})
	if t.Failed() {
		return
	}

	t.Run("kcp: the worker's kubeconfig reads the tenant's Echo and nothing else", func(t *testing.T) {
		if !strings.HasSuffix(strings.TrimSuffix(workerCfg.Host, "/"), "/clusters/"+tenantLC.String()) {
			t.Errorf("worker kubeconfig points at %s, want the workspace %s", workerCfg.Host, tenantLC)
		}
		worker := harness.NewClient(t, workerCfg, echoScheme)
		if err := worker.Get(ctx, demo, &v1alpha1.Echo{}); err != nil {
			t.Errorf("reading its own Echo: %v", err)
		}
		if err := worker.List(ctx, &v1alpha1.EchoList{}, client.InNamespace("default")); err != nil {
			t.Errorf("listing Echoes in its workspace: %v", err)
		}
		forbidden := func(what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: want forbidden, got %v", what, err)
			}
		}
		forbidden("writing its Echo", worker.Create(ctx, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}}))
		forbidden("listing Secrets", worker.List(ctx, &corev1.SecretList{}))
		forbidden("listing ConfigMaps", worker.List(ctx, &corev1.ConfigMapList{}))
		forbidden("writing the provider's ConfigMap", worker.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}}))
		forbidden("listing ServiceAccounts", worker.List(ctx, &corev1.ServiceAccountList{}))
		forbidden("listing ClusterRoles", worker.List(ctx, &rbacv1.ClusterRoleList{}))
		forbidden("listing APIBindings", worker.List(ctx, &apisv1alpha2.APIBindingList{}))
		_, err := kubernetes.NewForConfigOrDie(workerCfg).CoreV1().ServiceAccounts("default").
			CreateToken(ctx, providerName+"-workload", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		forbidden("minting tokens", err)
		ncfg := rest.CopyConfig(workerCfg)
		ncfg.Host = strings.TrimSuffix(strings.TrimSuffix(workerCfg.Host, "/"), tenantLC.String()) + neighbourPath.String()
		if err := harness.NewClient(t, ncfg, echoScheme).Get(ctx, demo, &v1alpha1.Echo{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Errorf("reading the neighbour's Echo: want forbidden, got %v", err)
		}
		pcfg := rest.CopyConfig(workerCfg)
		pcfg.Host = strings.TrimSuffix(strings.TrimSuffix(workerCfg.Host, "/"), tenantLC.String()) + providerWS
		if err := harness.NewClient(t, pcfg, echoScheme).List(ctx, &apisv1alpha2.APIExportList{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Errorf("reading the provider workspace: want forbidden, got %v", err)
		}
	})

	t.Run("kcp: the Echo's version and message reach the worker", func(t *testing.T) {
		harness.Patch(ctx, t, tenant, demo, func(e *v1alpha1.Echo) { e.Spec.Version = "v9.9.9" })
		msg := waitEchoReason(ctx, t, tenant, demo, "ProviderRejected")
		if !strings.Contains(msg, "v1.0.0, v1.1.0") {
			t.Errorf("message %q does not list the offered versions", msg)
		}
		harness.Patch(ctx, t, tenant, demo, func(e *v1alpha1.Echo) { e.Spec.Version, e.Spec.Message = "v1.1.0", "bonjour" })
		waitEchoReady(ctx, t, tenant, demo)
		wantWorker(ctx, t, wl, wlNamespace, v11Image, 2, "bonjour")
	})

	t.Run("standard: an Echo on the onboarding cluster gets a worker for the ControlPlane", func(t *testing.T) {
		created := createSample(t, ob)
		e := waitEchoReady(ctx, t, ob, demo)
		t.Logf("standard: Echo Ready %s after creation", time.Since(created).Round(10*time.Millisecond))
		if e.Status.Identity != demo.String() {
			t.Errorf("identity %q", e.Status.Identity)
		}
		ns := cluster.StandardIdentity(demo.Namespace, demo.Name).TenantNamespace()
		wantWorker(ctx, t, wl, ns, v1Image, 1, "hello from the echo service")
		cfg := secretKubeconfig(ctx, t, wl, client.ObjectKey{Namespace: ns, Name: echo.KubeconfigSecret}, echo.KubeconfigKey)
		if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(mcpSrv.Config.Host, "/") {
			t.Errorf("worker kubeconfig points at %s, want the MCP %s", cfg.Host, mcpSrv.Config.Host)
		}
		if err := harness.NewClient(t, cfg, echoScheme).List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
			t.Errorf("worker listing Secrets on its MCP: want forbidden, got %v", err)
		}
		// The provider wrote echo-info with its own AccessRequest's credential; the
		// worker's, a second AccessRequest, may not touch it.
		mcp := harness.NewClient(t, mcpSrv.Config, echoScheme)
		info := client.ObjectKey{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}
		if err := mcp.Get(ctx, info, &corev1.ConfigMap{}); err != nil {
			t.Errorf("echo-info on the MCP: %v", err)
		}
		if err := harness.NewClient(t, cfg, echoScheme).Get(ctx, info, &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
			t.Errorf("worker reading echo-info on its MCP: want forbidden, got %v", err)
		}
		tenantARs := client.MatchingLabels{"openmcp.cloud/onboarding-name": demo.Name, "openmcp.cloud/onboarding-namespace": demo.Namespace}
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := pf.List(ctx, ars, tenantARs); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ar := range ars.Items {
			names = append(names, ar.Name[strings.LastIndex(ar.Name, "--"):])
		}
		if slices.Sort(names); !slices.Equal(names, []string{"--mcp", "--mcp-worker", "--wl"}) {
			t.Errorf("the tenant's AccessRequests end in %v, want --mcp, --mcp-worker and --wl", names)
		}
		took := harness.DeleteAndWait(ctx, t, ob, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: demo.Name}})
		t.Logf("standard: Echo deleted in %s", took.Round(10*time.Millisecond))
		wantNoWorker(ctx, t, wl, ns)
		if err := mcp.Get(ctx, info, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("echo-info on the MCP after deletion: %v, want not found", err)
		}
		harness.Eventually(ctx, t, time.Minute, "the tenant's AccessRequests released", func(ctx context.Context) error {
			if err := pf.List(ctx, ars, tenantARs); err != nil {
				return err
			}
			if len(ars.Items) != 0 {
				return fmt.Errorf("%d AccessRequests left", len(ars.Items))
			}
			return nil
		})
	})

	t.Run("kcp: deleting the Echo removes the worker and every access the runtime created", func(t *testing.T) {
		took := harness.DeleteAndWait(ctx, t, tenant, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: demo.Name}})
		t.Logf("kcp: Echo deleted in %s", took.Round(10*time.Millisecond))
		wantNoWorker(ctx, t, wl, wlNamespace)
		if err := tenant.Get(ctx, client.ObjectKey{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("echo-info in the workspace after deletion: %v, want not found", err)
		}
		// In the workspace: the worker's ServiceAccount and the RBAC of it and of the
		// runtime's token minting.
		sel := client.MatchingLabels{managedBy: providerName}
		for _, l := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			if err := tenant.List(ctx, l, sel); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(l); n != 0 {
				t.Errorf("%d %T left in the tenant workspace", n, l)
			}
		}
		// On the platform: the workload cluster's ClusterRequest and AccessRequest.
		lc := client.MatchingLabels{workspaces.LogicalClusterLabel: tenantLC.String()}
		ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
		harness.Eventually(ctx, t, time.Minute, "platform requests of the tenant released", func(ctx context.Context) error {
			if err := pf.List(ctx, ars, lc); err != nil {
				return err
			}
			if err := pf.List(ctx, crs, lc); err != nil {
				return err
			}
			if n := len(ars.Items) + len(crs.Items); n != 0 {
				return fmt.Errorf("%d AccessRequests, %d ClusterRequests", len(ars.Items), len(crs.Items))
			}
			return nil
		})
		// And the credentials themselves no longer work.
		waitRejected(ctx, t, "the worker's workspace token", workerCfg)
		waitRejected(ctx, t, "the runtime's workload cluster token", workloadAccessCfg)
		// The neighbour is untouched.
		waitEchoReady(ctx, t, neighbour, demo)
	})

	t.Run("SIGTERM stops run cleanly", func(t *testing.T) {
		if run.Exited() {
			t.Fatalf("run exited by itself: %v", run.Err())
		}
		start := time.Now()
		if err := run.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
			t.Errorf("run: %v", err)
		}
		t.Logf("run stopped in %s", time.Since(start).Round(10*time.Millisecond))
		// Least privilege must not mean silent failures: with exactly config/rbac and
		// the requested onboarding rules, nothing the runtime did was refused.
		for _, line := range strings.Split(run.Tail(100000), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("run was refused something: %s", line)
			}
		}
	})
	t.Logf("TestBinary took %s", time.Since(testStart).Round(time.Second))
}

// wantWorker waits until the worker Deployment in ns runs image with replicas and
// message, and checks what it must never get.
func wantWorker(ctx context.Context, t testing.TB, wl client.Client, ns, image string, replicas int32, message string) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, "worker Deployment in "+ns, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.WorkerName}, d); err != nil {
			return err
		}
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			return fmt.Errorf("containers %d", len(pod.Containers))
		}
		c := pod.Containers[0]
		if c.Image != image || d.Spec.Replicas == nil || *d.Spec.Replicas != replicas || !slices.Contains(c.Args, "--message="+message) {
			return fmt.Errorf("image %s, replicas %v, args %q", c.Image, d.Spec.Replicas, c.Args)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			return fmt.Errorf("the worker gets a workload cluster token")
		}
		if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != echo.KubeconfigSecret {
			return fmt.Errorf("volumes %+v", pod.Volumes)
		}
		return nil
	})
}

func wantNoWorker(ctx context.Context, t testing.TB, wl client.Client, ns string) {
	t.Helper()
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Secret{}} {
		name := echo.WorkerName
		if _, ok := o.(*corev1.Secret); ok {
			name = echo.KubeconfigSecret
		}
		if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s/%s: want gone, got %v", o, ns, name, err)
		}
	}
}
