package e2ebinary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/harness"
)

// repoRoot is where config/ and the README are, relative to this package.
const repoRoot = "../.."

// buildBinary builds cmd/kcp-serviceprovider into the test's temporary folder: the
// tests run the binary users and the openmcp-operator run, not the packages in-process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kcp-serviceprovider")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kcp-serviceprovider")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	t.Logf("binary built in %s", time.Since(start).Round(100*time.Millisecond))
	return bin
}

// proc is a subprocess of the test, leader of its own process group.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts the binary with args and extra environment, output into a log file
// in dir. Its thread stays locked until the process exits, and the kernel kills the
// process if that thread dies (the test binary was killed): nothing outlives the test.
// t.Cleanup stops it (SIGTERM, then SIGKILL) and prints its log tail on failure.
func startProc(t *testing.T, dir, name, path string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = dir
	p.cmd.Env = localenv.MergeEnv(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = p.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s's log:\n%s", name, tail(p.log, 40))
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and waits up to grace, then kills it. It
// returns the process's exit error (nil for a clean exit) or a timeout error.
func (p *proc) stop(grace time.Duration) error {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not stop within %s", p.name, grace)
}

// wait waits for the process to exit by itself.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not finish within %s:\n%s", p.name, timeout, tail(p.log, 40))
		return nil
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP200 polls url until it answers 200, failing early when p exits.
func waitHTTP200(ctx context.Context, t *testing.T, p *proc, url string, timeout time.Duration) {
	t.Helper()
	poll(ctx, t, timeout, url, func(ctx context.Context) error {
		if p.exited() {
			t.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.log, 40))
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

func poll(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func(context.Context) error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("%s: not reached within %s: %v", what, timeout, last)
	}
}

// readObjects decodes every object of a YAML file of the repository.
func readObjects(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applyFile creates every object of a repository YAML file with c.
func applyFile(ctx context.Context, t testing.TB, c client.Client, file string) {
	t.Helper()
	for _, u := range readObjects(t, file) {
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
}

func newClient(t testing.TB, cfg *rest.Config) client.Client {
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

// tokenKubeconfig mints a token for ServiceAccount ns/name with the admin config cfg
// and writes a kubeconfig for it into dir/file, returning its path and contents.
func tokenKubeconfig(ctx context.Context, t testing.TB, cfg *rest.Config, ns, name, dir, file string) (string, []byte) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	var tr *authenticationv1.TokenRequest
	poll(ctx, t, time.Minute, "token of "+ns+"/"+name, func(ctx context.Context) error {
		var err error
		tr, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
		}, metav1.CreateOptions{})
		return err
	})
	raw, err := kubeconfig.Render("c", kubeconfig.Server{URL: cfg.Host, CAData: cfg.CAData}, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

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
	poll(ctx, t, 2*time.Minute, key.String()+" Ready", func(ctx context.Context) error {
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
	poll(ctx, t, 2*time.Minute, key.String()+" "+reason, func(ctx context.Context) error {
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

func deleteAndWait(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.Delete(ctx, &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 2*time.Minute, key.String()+" deleted", func(ctx context.Context) error {
		if err := c.Get(ctx, key, &v1alpha1.Echo{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	return time.Since(start)
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
	poll(ctx, t, time.Minute, what+" rejected", func(ctx context.Context) error {
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
