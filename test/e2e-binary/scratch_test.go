package e2ebinary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/scaffold/template/api/v1alpha1"
)

// scratchDir is the provider written from scratch on the command package.
const scratchDir = "internal/scaffold/template"

// scratchMainMaxLines is the promise of the command package: a provider's main.go,
// handing its description to the shared commands, fits in this many lines.
const scratchMainMaxLines = 30

// TestScratchProvider is the command package's acceptance test: a provider written
// from scratch (its types, provider.go and a main.go of at most 30 lines) builds into a
// binary whose init and run serve kcp tenants as the reference provider's do. It uses
// the runtime's generic manifests (config/kcp/runtime-rbac.yaml and
// tenant-apibinding.yaml) with the provider's names filled in, as their comments ask.
func TestScratchProvider(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	harness.LogToTest(t)

	raw, err := os.ReadFile(filepath.Join(repoRoot, scratchDir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte("\n")); n > scratchMainMaxLines {
		t.Errorf("%s/main.go has %d lines, want at most %d", scratchDir, n, scratchMainMaxLines)
	}

	const (
		name       = "notes"
		namespace  = localenv.DefaultOperatorNamespace     // where the openmcp-operator runs providers
		exportName = "notes.scratch.open-control-plane.io" // the Service API's group: the default
		workspace  = "root:providers:notes"
	)
	bin := filepath.Join(t.TempDir(), "scratch")
	build := exec.Command("go", "build", "-o", bin, "./"+scratchDir)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", scratchDir, err, out)
	}
	dir := t.TempDir()

	// The platform and the platform team: kcp, the API servers, the local platform
	// granting the workload cluster, and the provider workspace with the runtime's
	// identity from the generic RBAC manifest, filled in with the provider's export.
	rbac := filepath.Join(dir, "runtime-rbac.yaml")
	if err := os.WriteFile(rbac, templateFile(t, "config/kcp/runtime-rbac.yaml", `["widgets"]`, `["`+exportName+`"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := harness.StartPlatform(ctx, t, localenv.PlatformOptions{
		Clusters: []string{localenv.PurposeOnboarding, localenv.PurposeWorkload},
		Targets:  []string{localenv.PurposeWorkload},
		KCP:      true,
		Provider: &localenv.ProviderWorkspace{
			Path:           workspace,
			RBACFile:       rbac,
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"},
			Secret:         types.NamespacedName{Namespace: namespace, Name: "kcp-kubeconfig"},
		},
	})
	k, platform, onboarding := p.KCP, p.Platform, p.Onboarding
	pf, wl := newScratchClient(t, platform.Config), newScratchClient(t, p.Workload.Config)
	providerClient := harness.NewClient(t, k.ConfigFor(logicalcluster.NewPath(workspace)))
	if err := pf.Create(ctx, &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: "example.com/notes:v0"}}}); err != nil {
		t.Fatal(err)
	}
	platformKubeconfig := writeKubeconfig(t, dir, "platform.kubeconfig", platform.Kubeconfig())
	onboardingKubeconfig := writeKubeconfig(t, dir, "onboarding.kubeconfig", onboarding.Kubeconfig())
	args := func(cmd string, more ...string) []string {
		return append([]string{cmd, "--verbosity=DEBUG", "--platform-kubeconfig=" + platformKubeconfig}, more...)
	}
	env := []string{"POD_NAMESPACE=" + namespace, "OPENMCP_PROVIDER_NAME=" + name}

	initProc := startProc(t, "scratch-init", bin, args("init", "--onboarding-kubeconfig="+onboardingKubeconfig), env)
	if err := waitExit(t, initProc, 3*time.Minute); err != nil {
		t.Fatalf("init failed: %v\n%s", err, initProc.Tail(40))
	}
	sp := &providerv1alpha1.ServiceProvider{}
	if err := pf.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
		t.Fatal(err)
	}
	if want := (metav1.GroupVersionKind{Group: exportName, Version: "v1alpha1", Kind: "Note"}); len(sp.Status.Resources) != 1 || sp.Status.Resources[0] != want {
		t.Errorf("ServiceProvider status.resources = %v, want [%v]", sp.Status.Resources, want)
	}

	if err := pf.Create(ctx, &v1alpha1.NoteConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NoteConfigSpec{KCP: &rtv1alpha1.KCP{
		ProviderWorkspace: workspace,
		KubeconfigSecret:  rtv1alpha1.SecretReference{Namespace: namespace, Name: "kcp-kubeconfig"},
	}}}); err != nil {
		t.Fatal(err)
	}
	ports, err := localenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	probe := "127.0.0.1:" + strconv.Itoa(ports[0])
	run := startProc(t, "scratch-run", bin, args("run", "--standard-mode=false", "--retry-interval=1s",
		"--health-probe-bind-address="+probe, "--metrics-bind-address=0"), env)
	waitHTTP200(ctx, t, run, "http://"+probe+"/readyz", 3*time.Minute)
	harness.Eventually(ctx, t, 3*time.Minute, "APIExport provisioned by run", func(ctx context.Context) error {
		export := &apisv1alpha2.APIExport{}
		if err := providerClient.Get(ctx, client.ObjectKey{Name: exportName}, export); err != nil {
			return err
		}
		if export.Status.IdentityHash == "" {
			return errors.New("no identity yet")
		}
		return nil
	})

	// A tenant binds the export with the generic binding and asks for a Note.
	tenantPath, tenantLC := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "notes-tenant")
	tenant := newScratchClient(t, k.ConfigFor(tenantPath))
	binding := filepath.Join(dir, "tenant-apibinding.yaml")
	if err := os.WriteFile(binding, templateFile(t, "config/kcp/tenant-apibinding.yaml",
		"path: root:provider\n", "path: "+workspace+"\n",
		"managed-by: widgets", "managed-by: "+name,
		"name: widgets", "name: "+exportName), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.ApplyYAML(ctx, t, tenant, binding)
	harness.Eventually(ctx, t, 2*time.Minute, "APIBinding Bound", func(ctx context.Context) error {
		b := &apisv1alpha2.APIBinding{}
		if err := tenant.Get(ctx, client.ObjectKey{Name: exportName}, b); err != nil {
			return err
		}
		if b.Status.Phase != apisv1alpha2.APIBindingPhaseBound {
			return fmt.Errorf("phase %q", b.Status.Phase)
		}
		return nil
	})
	key := client.ObjectKey{Namespace: "default", Name: "hello"}
	harness.Eventually(ctx, t, time.Minute, "Note created", func(ctx context.Context) error {
		err := tenant.Create(ctx, &v1alpha1.Note{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: v1alpha1.NoteSpec{Text: "written from scratch"}})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err // the binding's resource may not be served yet
	})
	harness.Eventually(ctx, t, 2*time.Minute, "Note Ready", func(ctx context.Context) error {
		n := &v1alpha1.Note{}
		if err := tenant.Get(ctx, key, n); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(n.Status.Conditions, rtv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || n.Status.ObservedGeneration != n.Generation {
			return fmt.Errorf("status %+v", n.Status)
		}
		return nil
	})
	ns := cluster.KCPIdentity(tenantLC.String()).TenantNamespace()
	cm := &corev1.ConfigMap{}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "note"}, cm); err != nil || cm.Data["text"] != "written from scratch" {
		t.Errorf("ConfigMap %s/note on the workload cluster: %v, data %v", ns, err, cm.Data)
	}

	if err := tenant.Delete(ctx, &v1alpha1.Note{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 2*time.Minute, "Note deleted", func(ctx context.Context) error {
		return localenv.Gone(tenant.Get(ctx, key, &v1alpha1.Note{}))
	})
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "note"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap %s/note: want gone, got %v", ns, err)
	}
	if err := run.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("run: %v", err)
	}
}

// newScratchClient is a client knowing the harness's and the scratch provider's types.
func newScratchClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	s := harness.Scheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// templateFile reads a repository file and replaces old/new string pairs in it: the
// generic manifests name a placeholder provider. A pair whose old string is missing
// fails the test, so a changed manifest cannot silently leave the placeholder.
func templateFile(t testing.TB, file string, oldnew ...string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(oldnew); i += 2 {
		if !strings.Contains(string(raw), oldnew[i]) {
			t.Fatalf("%s does not contain %q any more", file, oldnew[i])
		}
	}
	return []byte(strings.NewReplacer(oldnew...).Replace(string(raw)))
}
