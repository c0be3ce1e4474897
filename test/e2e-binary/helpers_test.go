package e2ebinary

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// repoRoot is where config/ and the README are, relative to this package.
const repoRoot = "../.."

// The binaries the tests build: what a platform deploys, and the same provider with the
// local command (make run).
const (
	productMain = "./cmd/kcp-serviceprovider"
	localMain   = "./cmd/kcp-serviceprovider-local"
)

// built are the binaries this test binary has built, by package: three tests run the
// product binary, and each build costs seconds of both cores to link.
var built = struct {
	sync.Mutex
	paths map[string]string
}{paths: map[string]string{}}

// buildBinary builds the main package pkg once per test binary, into its scratch
// folder (removed by harness.Main), and returns its path: the tests run the binary
// users and the openmcp-operator run, not the packages in-process. It is linked
// without DWARF (-s -w), as the test binaries are: stack traces keep file and line.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.paths[pkg]; ok {
		return bin
	}
	dir, err := localenv.ScratchDir("bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	start := time.Now()
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	t.Logf("binary %s built in %s", pkg, time.Since(start).Round(100*time.Millisecond))
	built.paths[pkg] = bin
	return bin
}

// startProc starts the binary with args and extra environment, its output in a log
// file; the end of the test stops it (SIGTERM, then SIGKILL after 30 s).
func startProc(t *testing.T, name, path string, args, env []string) *harness.Process {
	t.Helper()
	return harness.StartProcess(t, name, path, args, 30*time.Second, env...)
}

// waitExit waits for the process to exit by itself and returns its exit error.
func waitExit(t *testing.T, p *harness.Process, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.Done():
		return p.Err()
	case <-time.After(timeout):
		t.Fatalf("%s did not finish within %s:\n%s", p.Name, timeout, p.Tail(40))
		return nil
	}
}

// waitHTTP200 polls url until it answers 200, failing early when p exits.
func waitHTTP200(ctx context.Context, t *testing.T, p *harness.Process, url string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(ctx, t, timeout, url, func(ctx context.Context) error {
		if p.Exited() {
			t.Fatalf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(40))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// tokenKubeconfig mints a token for ServiceAccount ns/name with the admin config cfg
// and writes a kubeconfig for it into dir/file, returning its path and contents.
func tokenKubeconfig(ctx context.Context, t testing.TB, cfg *rest.Config, ns, name, dir, file string) (string, []byte) {
	t.Helper()
	raw, err := localenv.ServiceAccountKubeconfig(ctx, cfg, ns, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return writeKubeconfig(t, dir, file, raw), raw
}

// echoScheme is the harness Scheme with the Echo provider's types.
var echoScheme = func() *runtime.Scheme {
	s := harness.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// writeKubeconfig writes raw into dir/file.
func writeKubeconfig(t testing.TB, dir, file string, raw []byte) string {
	t.Helper()
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitEchoReady waits for Ready=True at the current generation and returns the Echo.
func waitEchoReady(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey) *v1alpha1.Echo {
	t.Helper()
	var got *v1alpha1.Echo
	harness.Eventually(ctx, t, 2*time.Minute, key.String()+" Ready", func(ctx context.Context) error {
		e := &v1alpha1.Echo{}
		if err := c.Get(ctx, key, e); err != nil {
			return err
		}
		got = e
		cond := meta.FindStatusCondition(e.Status.Conditions, rtv1alpha1.ConditionReady)
		if cond == nil || cond.Status != metav1.ConditionTrue || e.Status.ObservedGeneration != e.Generation || e.Status.Phase != rtv1alpha1.PhaseReady {
			return fmt.Errorf("status %+v", e.Status)
		}
		return nil
	})
	return got
}

// waitEchoReason waits for Ready=False with reason and returns the message.
func waitEchoReason(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, reason string) string {
	t.Helper()
	var msg string
	harness.Eventually(ctx, t, 2*time.Minute, key.String()+" "+reason, func(ctx context.Context) error {
		e := &v1alpha1.Echo{}
		if err := c.Get(ctx, key, e); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(e.Status.Conditions, rtv1alpha1.ConditionReady)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || e.Status.ObservedGeneration != e.Generation {
			return fmt.Errorf("status %+v", e.Status)
		}
		msg = cond.Message
		return nil
	})
	return msg
}

// secretKubeconfig reads a kubeconfig Secret's config.
func secretKubeconfig(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, dataKey string) *rest.Config {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		t.Fatalf("Secret %s: %v", key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[dataKey])
	if err != nil {
		t.Fatalf("Secret %s: %v", key, err)
	}
	return cfg
}

// waitRejected polls until cfg's credentials are rejected (401) by the server: a
// fresh client each time, since API servers cache token reviews for a few seconds.
func waitRejected(ctx context.Context, t testing.TB, what string, cfg *rest.Config) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, what+" rejected", func(ctx context.Context) error {
		cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			return err
		}
		_, err = cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("still accepted (%v)", err)
	})
}

// bindSample binds the echo export in a tenant workspace with the sample APIBinding and
// waits until it is bound.
func bindSample(ctx context.Context, t testing.TB, c client.Client) {
	t.Helper()
	harness.ApplyYAML(ctx, t, c, filepath.Join(repoRoot, "examples/echo/config/kcp/apibinding.yaml"))
	harness.Eventually(ctx, t, 2*time.Minute, "APIBinding Bound", func(ctx context.Context) error {
		b := &apisv1alpha2.APIBinding{}
		if err := c.Get(ctx, client.ObjectKey{Name: "echo"}, b); err != nil {
			return err
		}
		if b.Status.Phase != apisv1alpha2.APIBindingPhaseBound {
			return fmt.Errorf("phase %q", b.Status.Phase)
		}
		return nil
	})
}

// createSample creates the sample Echo (examples/echo/config/samples) and returns when.
func createSample(ctx context.Context, t testing.TB, c client.Client) time.Time {
	t.Helper()
	var created time.Time
	harness.Eventually(ctx, t, time.Minute, "sample Echo created", func(ctx context.Context) error {
		if err := localenv.ApplyFile(ctx, c, filepath.Join(repoRoot, "examples/echo/config/samples/echo_v1alpha1_echo.yaml"), nil); err != nil {
			return err // the binding's resource may not be served yet
		}
		created = time.Now()
		return nil
	})
	return created
}

// waitExportProvisioned waits until run has provisioned echo's APIExport in the
// provider workspace and kcp has given it an identity.
func waitExportProvisioned(ctx context.Context, t *testing.T, provider client.Client) {
	t.Helper()
	harness.Eventually(ctx, t, 3*time.Minute, "APIExport provisioned by run", func(ctx context.Context) error {
		export := &apisv1alpha2.APIExport{}
		if err := provider.Get(ctx, client.ObjectKey{Name: echo.ExportName}, export); err != nil {
			return err
		}
		if export.Status.IdentityHash == "" {
			return fmt.Errorf("no identity yet")
		}
		return nil
	})
}

// echoPlatform is the platform the binary is tested on: kcp with the provider
// workspace, the runtime's identity there (exactly echo's shipped RBAC) and its
// kubeconfig in the Secret the sample ProviderConfig names; API servers for the
// platform, onboarding, workload and MCP clusters; the real openmcp-operator's
// scheduler and access-request controller; the local cluster provider granting
// workload, onboarding and MCP access; and the ControlPlane default/demo.
func echoPlatform() localenv.PlatformOptions {
	return localenv.PlatformOptions{
		Clusters:      []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		Targets:       []string{localenv.PurposeWorkload, localenv.PurposeOnboarding, localenv.PurposeMCP},
		ControlPlanes: []types.NamespacedName{{Namespace: demo.Namespace, Name: demo.Name}},
		KCP:           true,
		Provider: &localenv.ProviderWorkspace{
			Path:           providerWS,
			RBACFile:       filepath.Join(repoRoot, "examples/echo/config/kcp/runtime-rbac.yaml"),
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"},
			Secret:         types.NamespacedName{Namespace: providerNS, Name: "kcp-kubeconfig"},
		},
	}
}
