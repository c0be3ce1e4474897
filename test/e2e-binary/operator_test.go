package e2ebinary

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/kcp-dev/logicalcluster/v3"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// providerImage is the image of config/deploy: the kubelet stand-in runs the binary
// built by the test for it.
const providerImage = "ghcr.io/openmcp-project/kcp-serviceprovider:v0.1.0"

// TestOperatorDeploysProvider deploys the binary the way a platform does: the
// ServiceProvider of config/deploy/serviceprovider on the platform cluster, the real
// openmcp-operator rendering the init Job and the run Deployment, and the kubelet
// stand-in running them as processes with exactly the rendered args and env, as the
// operator's ServiceAccounts. cluster-admin grants nothing on this platform, so the
// operator's bindings to it are inert and config/rbac/platform.yaml is all the binary
// has. Tenants in kcp and standard mode get their Echo, and leave nothing behind.
func TestOperatorDeploysProvider(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	harness.LogToTest(t)
	testStart := time.Now()
	bin := buildBinary(t, productMain)
	env := harness.NewEnv(t, "operator-deploys")
	opts := echoPlatform()
	opts.Deployments = &localenv.KubeletOptions{Images: map[string]string{providerImage: bin}}
	opts.LocalPlatform = localplatform.Options{Logger: testr.New(t)}
	p, err := env.StartPlatform(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	pf := harness.NewClient(t, p.Platform.Config, echoScheme)
	ob := harness.NewClient(t, p.Onboarding.Config, echoScheme)
	wl := harness.NewClient(t, p.Workload.Config, echoScheme)
	clusterAdminGrantsNothing(ctx, t, p.Platform.Config, pf)
	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "config/rbac/platform.yaml"))
	kubelet := p.Kubelet

	deployStart := time.Now()
	probe, metrics := applyDeployment(ctx, t, pf, "config/deploy/serviceprovider/serviceprovider.yaml")
	initJob := waitJobComplete(ctx, t, pf, kubelet, "sp-echo-init")
	wantArgs(t, "init Job", initJob.Spec.Template.Spec.Containers[0].Args,
		"init", "--environment=local", "--verbosity=INFO", "--provider-name=echo")
	t.Logf("init Job complete %s after the ServiceProvider", time.Since(deployStart).Round(100*time.Millisecond))
	for c, name := range map[client.Client]string{ob: "echoes.echo.services.open-control-plane.io", pf: "providerconfigs.echo.services.open-control-plane.io"} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}
	sp := &providerv1alpha1.ServiceProvider{}
	waitDeployed(ctx, t, pf, kubelet, providerName, sp)
	if !slices.Equal(sp.Status.Resources, []metav1.GroupVersionKind{echoGVK}) {
		t.Errorf("ServiceProvider status.resources = %v, want exactly [%v]", sp.Status.Resources, echoGVK)
	}
	run := &appsv1.Deployment{}
	if err := pf.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: "sp-echo"}, run); err != nil {
		t.Fatal(err)
	}
	wantArgs(t, "run Deployment", run.Spec.Template.Spec.Containers[0].Args,
		"run", "--health-probe-bind-address="+probe, "--environment=local", "--verbosity=INFO", "--provider-name=echo",
		"--metrics-bind-address=:"+metrics, "--metrics-secure=false")
	t.Logf("ServiceProvider Ready %s after creation", time.Since(deployStart).Round(100*time.Millisecond))
	wantInertBindings(ctx, t, p.Platform.Config, pf, "sp-echo-init", "sp-echo")

	// kcp mode, as the platform team switches it on.
	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "examples/echo/config/samples/echo_v1alpha1_providerconfig_kcp.yaml"))
	k := &harness.KCP{KCP: p.KCP}
	providerClient := harness.NewClient(t, k.ConfigFor(logicalcluster.NewPath(providerWS)), echoScheme)
	waitExportProvisioned(ctx, t, providerClient)
	before := platformCredentials(ctx, t, pf)

	tenantPath, tenantLC := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "tenant")
	tenant := harness.NewClient(t, k.ConfigFor(tenantPath), echoScheme)
	bindSample(ctx, t, tenant)
	t.Run("kcp: the tenant's Echo becomes Ready", func(t *testing.T) {
		created := createSample(ctx, t, tenant)
		waitEchoReady(ctx, t, tenant, demo)
		t.Logf("kcp: Echo Ready %s after creation", time.Since(created).Round(10*time.Millisecond))
		wantWorker(ctx, t, wl, cluster.KCPIdentity(tenantLC.String()).TenantNamespace(), v1Image, 1, "hello from the echo service")
	})
	t.Run("standard: the ControlPlane's Echo becomes Ready", func(t *testing.T) {
		created := createSample(ctx, t, ob)
		waitEchoReady(ctx, t, ob, demo)
		t.Logf("standard: Echo Ready %s after creation", time.Since(created).Round(10*time.Millisecond))
		wantWorker(ctx, t, wl, cluster.StandardIdentity(demo.Namespace, demo.Name).TenantNamespace(), v1Image, 1, "hello from the echo service")
	})
	t.Run("deleting both leaves no request, Cluster or credential behind", func(t *testing.T) {
		for _, c := range []client.Client{tenant, ob} {
			took := harness.DeleteAndWait(ctx, t, c, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: demo.Name}})
			t.Logf("Echo deleted in %s", took.Round(10*time.Millisecond))
		}
		harness.Eventually(ctx, t, 2*time.Minute, "the platform's requests, Clusters and Secrets as before the tenants", func(ctx context.Context) error {
			return diffSets(before, platformCredentials(ctx, t, pf))
		})
	})
	wantNothingRefused(t, env, kubelet, "sp-echo")
	t.Logf("TestOperatorDeploysProvider took %s", time.Since(testStart).Round(time.Second))
}

// TestOperatorDeploysPlatformService deploys the same binary as a PlatformService
// (config/deploy/platformservice): the real openmcp-operator renders ps-echo-init and
// ps-echo, the kubelet stand-in runs them with config/rbac/platform-service.yaml only,
// and an Echo on the platform cluster gets its worker there.
func TestOperatorDeploysPlatformService(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	harness.LogToTest(t)
	bin := buildBinary(t, productMain)
	env := harness.NewEnv(t, "operator-platform-service")
	crds, err := localenv.OpenMCPCRDs(localenv.PurposePlatform)
	if err != nil {
		t.Fatal(err)
	}
	platform, err := env.StartAPIServer(localenv.PurposePlatform, crds)
	if err != nil {
		t.Fatal(err)
	}
	pf := harness.NewClient(t, platform.Config, echoScheme)
	clusterAdminGrantsNothing(ctx, t, platform.Config, pf)
	if err := pf.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNS}}); err != nil {
		t.Fatal(err)
	}
	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "config/rbac/platform-service.yaml"))
	// Only the deployment controller runs; the operator's configuration still needs a
	// purpose mapping, which nothing here uses.
	if _, err := env.StartOperator(ctx, platform, localenv.OperatorOptions{
		Controllers:     []string{localenv.ControllerDeployment},
		PurposeMappings: []localenv.PurposeMapping{{Purpose: localenv.PurposeWorkload, Profile: "unused", Tenancy: clustersv1alpha1.TENANCY_SHARED, Namespace: providerNS}},
	}); err != nil {
		t.Fatal(err)
	}
	kubelet, err := env.StartKubelet(ctx, platform, localenv.KubeletOptions{Images: map[string]string{providerImage: bin}})
	if err != nil {
		t.Fatal(err)
	}

	deployStart := time.Now()
	applyDeployment(ctx, t, pf, "config/deploy/platformservice/platformservice.yaml")
	initJob := waitJobComplete(ctx, t, pf, kubelet, "ps-echo-init")
	wantArgs(t, "init Job", initJob.Spec.Template.Spec.Containers[0].Args,
		"init", "--environment=local", "--verbosity=INFO", "--provider-name=echo")
	for _, name := range []string{"echoes.echo.services.open-control-plane.io", "providerconfigs.echo.services.open-control-plane.io"} {
		if err := pf.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s on the platform cluster: %v", name, err)
		}
	}
	waitDeployed(ctx, t, pf, kubelet, providerName, &providerv1alpha1.PlatformService{})
	t.Logf("PlatformService Ready %s after creation", time.Since(deployStart).Round(100*time.Millisecond))
	wantInertBindings(ctx, t, platform.Config, pf, "ps-echo-init", "ps-echo")

	harness.ApplyYAML(ctx, t, pf, filepath.Join(repoRoot, "examples/echo/config/samples/echo_v1alpha1_providerconfig.yaml"))
	created := createSample(ctx, t, pf)
	waitEchoReady(ctx, t, pf, demo)
	t.Logf("platform service: Echo Ready %s after creation", time.Since(created).Round(10*time.Millisecond))
	ns := cluster.PlatformIdentity(demo.Namespace, demo.Name).TenantNamespace()
	wantWorker(ctx, t, pf, ns, v1Image, 1, "hello from the echo service")
	harness.DeleteAndWait(ctx, t, pf, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: demo.Name}})
	wantNoWorker(ctx, t, pf, ns)
	sas := &corev1.ServiceAccountList{}
	if err := pf.List(ctx, sas, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, sa := range sas.Items {
		if strings.HasPrefix(sa.Name, providerName+"--") {
			t.Errorf("ServiceAccount %s/%s of the deleted Echo is left", ns, sa.Name)
		}
	}
	wantNothingRefused(t, env, kubelet, "ps-echo")
}

// clusterAdminGrantsNothing empties the ClusterRole cluster-admin on a test platform
// and waits until the API server's authorizer sees it. The openmcp-operator binds it
// to every ServiceAccount it deploys a provider with, and recreates those bindings on
// every reconcile, so deleting them proves nothing; with the role empty, whatever the
// binary does is allowed by the project's RBAC alone. The admin clients are
// system:masters, which needs no role.
func clusterAdminGrantsNothing(ctx context.Context, t *testing.T, admin *rest.Config, c client.Client) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster-admin"}, role); err != nil {
		t.Fatal(err)
	}
	// Not restored by the API server's bootstrap policy either.
	metav1.SetMetaDataAnnotation(&role.ObjectMeta, "rbac.authorization.kubernetes.io/autoupdate", "false")
	role.Rules = nil
	if err := c.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	probe := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin-probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "cluster-admin-probe"}},
	}
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, time.Minute, "cluster-admin granting nothing", func(ctx context.Context) error {
		return wantDenied(ctx, admin, "cluster-admin-probe")
	})
	harness.DeleteAndWait(ctx, t, c, probe)
}

// wantDenied is nil when user may not delete Nodes, which cluster-admin would allow
// and no role of the project grants.
func wantDenied(ctx context.Context, admin *rest.Config, user string) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if review.Status.Allowed {
		return fmt.Errorf("%s may delete Nodes", user)
	}
	return nil
}

// wantInertBindings checks that the operator bound cluster-admin to the accounts and
// that the bindings grant them nothing.
func wantInertBindings(ctx context.Context, t *testing.T, admin *rest.Config, c client.Client, accounts ...string) {
	t.Helper()
	for _, sa := range accounts {
		crb := &rbacv1.ClusterRoleBinding{}
		if err := c.Get(ctx, client.ObjectKey{Name: "openmcp.cloud:" + sa}, crb); err != nil {
			t.Errorf("the operator's binding of %s: %v", sa, err)
		} else if crb.RoleRef.Name != "cluster-admin" {
			t.Errorf("the operator binds %s to %s", sa, crb.RoleRef.Name)
		}
		if err := wantDenied(ctx, admin, "system:serviceaccount:"+providerNS+":"+sa); err != nil {
			t.Error(err)
		}
	}
}

// applyDeployment creates the ServiceProvider or PlatformService of a config/deploy
// file with two fields a kubelet's pod network makes unnecessary: pods here share the
// machine's ports, so the run command binds the health probes (default :8081) and
// the metrics to free ports. Both are spec fields the operator renders. It returns
// the probe address and metrics port.
func applyDeployment(ctx context.Context, t *testing.T, c client.Client, file string) (probe, metrics string) {
	t.Helper()
	ports, err := localenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	probe, metrics = "127.0.0.1:"+strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
	if err := localenv.ApplyFile(ctx, c, filepath.Join(repoRoot, file), func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"run", "--health-probe-bind-address=" + probe}, "spec", "runCommand")
		_ = unstructured.SetNestedField(u.Object, int64(ports[1]), "spec", "metrics", "port")
	}); err != nil {
		t.Fatal(err)
	}
	return probe, metrics
}

// waitJobComplete waits for the operator's init Job to be complete.
func waitJobComplete(ctx context.Context, t *testing.T, c client.Client, kubelet *localenv.Kubelet, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	harness.Eventually(ctx, t, 3*time.Minute, "Job "+name+" complete", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: name}, job); err != nil {
			return err
		}
		for _, jc := range job.Status.Conditions {
			if jc.Type == batchv1.JobComplete && jc.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("status %+v, refused %v", job.Status, kubelet.Refused())
	})
	if job.Status.Succeeded != 1 {
		t.Errorf("Job %s: succeeded %d, failed %d", name, job.Status.Succeeded, job.Status.Failed)
	}
	return job
}

// waitDeployed waits until the ServiceProvider or PlatformService is Ready at its
// generation, with its run pod running.
func waitDeployed(ctx context.Context, t *testing.T, c client.Client, kubelet *localenv.Kubelet, name string, obj client.Object) {
	t.Helper()
	harness.Eventually(ctx, t, 3*time.Minute, fmt.Sprintf("%T %s Ready", obj, name), func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		var s providerv1alpha1.DeploymentStatus
		switch o := obj.(type) {
		case *providerv1alpha1.ServiceProvider:
			s = o.Status.DeploymentStatus
		case *providerv1alpha1.PlatformService:
			s = o.Status.DeploymentStatus
		}
		ready := meta.FindStatusCondition(s.Conditions, "Ready")
		if s.Phase != "Ready" || ready == nil || ready.Status != metav1.ConditionTrue || s.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("phase %q, conditions %+v, refused %v", s.Phase, s.Conditions, kubelet.Refused())
		}
		return nil
	})
	if running := kubelet.Running(); len(running) != 1 {
		t.Errorf("pods running: %v, want the run Deployment's one", running)
	}
}

// wantArgs compares a rendered container's args.
func wantArgs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s args %q, want %q", what, got, want)
	}
}

// platformCredentials names every ClusterRequest, AccessRequest, Cluster and Secret
// on the platform cluster.
func platformCredentials(ctx context.Context, t *testing.T, c client.Client) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for kind, l := range map[string]client.ObjectList{
		"ClusterRequest": &clustersv1alpha1.ClusterRequestList{}, "AccessRequest": &clustersv1alpha1.AccessRequestList{},
		"Cluster": &clustersv1alpha1.ClusterList{}, "Secret": &corev1.SecretList{},
	} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			m, err := meta.Accessor(o)
			if err != nil {
				t.Fatal(err)
			}
			out[kind+" "+m.GetNamespace()+"/"+m.GetName()] = true
		}
	}
	return out
}

// diffSets is nil when have equals want, and names the differences otherwise.
func diffSets(want, have map[string]bool) error {
	var extra, missing []string
	for k := range have {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	if len(extra)+len(missing) == 0 {
		return nil
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Errorf("left behind %v, gone %v (of %v)", extra, missing, slices.Sorted(maps.Keys(want)))
}

// wantNothingRefused checks that the kubelet ran every pod it was given and that no
// request of the pods prefixed podPrefix was refused by the API server: least
// privilege must not mean silent failures.
func wantNothingRefused(t *testing.T, env *localenv.Env, kubelet *localenv.Kubelet, podPrefix string) {
	t.Helper()
	for _, err := range kubelet.Refused() {
		t.Errorf("kubelet refused: %v", err)
	}
	n := 0
	for _, log := range env.Logs() {
		if !strings.HasPrefix(filepath.Base(log), "pod-"+providerNS+"-"+podPrefix) {
			continue
		}
		n++
		for _, line := range strings.Split(localenv.LogTail(log, 100000), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s: refused something: %s", filepath.Base(log), line)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d pod logs of %s, want the init Job's and the run Deployment's", n, podPrefix)
	}
}
