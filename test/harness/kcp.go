package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kcp-dev/logicalcluster/v3"
)

const (
	// kcpStartTimeout bounds the wait for /readyz. kcp needs about 30 s on an idle
	// two-core machine; the margin covers a machine shared with other test runs.
	kcpStartTimeout = 3 * time.Minute
	// kcpStopGrace is how long kcp may take to shut down before it is killed.
	kcpStopGrace = 30 * time.Second
	// kcpStartAttempts bounds retries when a free port was taken between picking it
	// and kcp binding it (another test binary on the machine may do the same).
	kcpStartAttempts = 3
)

// startMarker begins the log of each start of kcp in its log file.
const startMarker = "=== harness: starting "

// KCP is a kcp server (one shard, embedded etcd) started by StartKCP.
type KCP struct {
	dir        string // scratch folder: root directory, log, token file
	rootDir    string
	logPath    string
	tokenFile  string
	adminToken string
	binary     string
	cfg        kcpConfig
	thread     *pinnedThread

	mu    sync.Mutex
	port  int      // secure port, kept across Restart
	args  []string // arguments of the current ports, kept across Restart
	proc  *process
	admin *rest.Config
}

// KCPOption configures StartKCP.
type KCPOption func(*kcpConfig)

type kcpConfig struct {
	featureGates []string
	extraArgs    []string
}

// WithFeatureGates enables kcp feature gates, e.g. "GlobalServiceAccount=true"
// (lets a ServiceAccount of one workspace be named as a user in another).
func WithFeatureGates(gates ...string) KCPOption {
	return func(c *kcpConfig) { c.featureGates = append(c.featureGates, gates...) }
}

// WithKCPArgs appends arguments to `kcp start`.
func WithKCPArgs(args ...string) KCPOption {
	return func(c *kcpConfig) { c.extraArgs = append(c.extraArgs, args...) }
}

// StartKCP starts `kcp start` with its own root directory on free ports of
// 127.0.0.1 and waits until it is ready. t.Cleanup stops it and removes its files;
// if the test failed, the tail of kcp's log is printed first.
func StartKCP(t testing.TB, opts ...KCPOption) *KCP {
	t.Helper()
	assets := assetsDir(t)
	k := &KCP{
		binary: filepath.Join(assets, "kcp"),
		thread: newPinnedThread(),
	}
	for _, o := range opts {
		o(&k.cfg)
	}
	k.dir = scratchDir(t, "kcp")
	k.rootDir = filepath.Join(k.dir, "root")
	k.logPath = filepath.Join(k.dir, "kcp.log")
	k.tokenFile = filepath.Join(k.dir, "tokens.csv")
	if err := k.writeAdminToken(); err != nil {
		t.Fatalf("starting kcp: %v", err)
	}
	// Registered before the start, so a failed or interrupted start is cleaned up too.
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, "kcp", k.logPath)
		}
		if err := k.Stop(); err != nil {
			t.Errorf("stopping kcp: %v", err)
		}
		k.thread.close()
		_ = os.RemoveAll(k.dir)
	})

	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := k.startOnFreePorts()
		if err == nil {
			break
		}
		if attempt < kcpStartAttempts && k.portTaken() {
			t.Logf("kcp lost a port race, retrying on other ports: %v", err)
			continue
		}
		logTail(t, "kcp", k.logPath)
		t.Fatalf("starting kcp: %v", err)
	}
	t.Logf("kcp ready at %s after %s (files in %s)", k.URL(), time.Since(start).Round(100*time.Millisecond), k.dir)
	return k
}

// startOnFreePorts picks new ports and starts kcp with an empty root directory.
func (k *KCP) startOnFreePorts() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	// A previous attempt may have initialised etcd with other ports.
	if err := os.RemoveAll(k.rootDir); err != nil {
		return fmt.Errorf("clearing root directory: %w", err)
	}
	if err := os.MkdirAll(k.rootDir, 0o700); err != nil {
		return fmt.Errorf("creating root directory: %w", err)
	}
	args := []string{
		"start",
		"--root-directory=" + k.rootDir,
		"--bind-address=127.0.0.1",
		"--external-hostname=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--embedded-etcd-client-port=" + strconv.Itoa(ports[1]),
		"--embedded-etcd-peer-port=" + strconv.Itoa(ports[2]),
		"--token-auth-file=" + k.tokenFile,
	}
	if len(k.cfg.featureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(k.cfg.featureGates, ","))
	}
	args = append(args, k.cfg.extraArgs...)

	k.mu.Lock()
	k.port, k.args = ports[0], args
	k.mu.Unlock()
	return k.start()
}

// start runs kcp with the current arguments and waits for /readyz.
func (k *KCP) start() error {
	logFile, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening kcp log: %w", err)
	}
	// The child has its own copy of the descriptor.
	defer logFile.Close()

	k.mu.Lock()
	args := k.args
	k.mu.Unlock()
	fmt.Fprintf(logFile, "%s%s %s\n", startMarker, k.binary, strings.Join(args, " "))

	cmd := exec.Command(k.binary, args...)
	cmd.Dir = k.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := startProcess(k.thread, cmd)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.proc = proc
	k.mu.Unlock()

	if err := k.waitReady(); err != nil {
		// Leave nothing half-started behind; the error says what happened.
		_ = proc.stop(5 * time.Second)
		return err
	}
	return nil
}

// waitReady polls /readyz with the admin credentials kcp writes at start-up.
func (k *KCP) waitReady() error {
	k.mu.Lock()
	proc := k.proc
	k.mu.Unlock()

	var lastProblem string
	ctx, cancel := context.WithTimeout(context.Background(), kcpStartTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if proc.exited() {
			return false, fmt.Errorf("kcp exited before it was ready: %v", proc.waitErr)
		}
		cfg, err := k.loadAdminConfig()
		if err != nil {
			lastProblem = err.Error() // not written yet, or being rewritten
			return false, nil
		}
		status, err := get(ctx, cfg, "/readyz")
		if err != nil {
			lastProblem = err.Error()
			return false, nil
		}
		if status != http.StatusOK {
			lastProblem = fmt.Sprintf("/readyz answered %d", status)
			return false, nil
		}
		k.mu.Lock()
		k.admin = cfg
		k.mu.Unlock()
		return true, nil
	})
	if err != nil {
		if proc.exited() {
			return fmt.Errorf("kcp exited before it was ready: %v", proc.waitErr)
		}
		return fmt.Errorf("kcp not ready within %s (last: %s): %w", kcpStartTimeout, lastProblem, err)
	}
	return nil
}

// adminUser is the harness's kcp administrator, authenticated by a static token.
//
// Why not a user of kcp's admin.kubeconfig: kcp-admin gets a new token at every
// start, which would break configs handed out before a Restart, and shard-admin is
// in system:masters, whose workspaces kcp creates without an owner, so their default
// APIBindings are never initialised and they never become Ready. A user in kcp's
// global admin group with a token of our own has neither problem.
const (
	adminUser  = "ksp-harness-admin"
	adminGroup = "system:kcp:admin"
)

// writeAdminToken creates a random token for adminUser and the token file for kcp's
// --token-auth-file (token,user,uid,"group").
func (k *KCP) writeAdminToken() error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("generating admin token: %w", err)
	}
	k.adminToken = hex.EncodeToString(b)
	line := fmt.Sprintf("%s,%s,%s,%q\n", k.adminToken, adminUser, adminUser, adminGroup)
	if err := os.WriteFile(k.tokenFile, []byte(line), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	return nil
}

// loadAdminConfig builds admin access to the root workspace: kcp's address and CA
// from the admin.kubeconfig kcp writes at start-up, and the harness's own token.
func (k *KCP) loadAdminConfig() (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(filepath.Join(k.rootDir, "admin.kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("reading admin.kubeconfig: %w", err)
	}
	base := raw.Clusters["base"]
	if base == nil || len(base.CertificateAuthorityData) == 0 {
		return nil, errors.New("admin.kubeconfig has no cluster \"base\" with a CA")
	}
	cfg := &rest.Config{
		Host:            strings.TrimSuffix(base.Server, "/") + logicalcluster.NewPath("root").RequestPath(),
		BearerToken:     k.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: base.CertificateAuthorityData},
	}
	// Tests create workspaces and bindings in bursts; client-go's default of 5 QPS
	// would make them wait on the client instead of kcp.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// get performs an authenticated GET on the server behind cfg and returns the status.
func get(ctx context.Context, cfg *rest.Config, path string) (int, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, fmt.Errorf("building HTTP client: %w", err)
	}
	httpClient.Timeout = 5 * time.Second
	base, err := baseURL(cfg.Host)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// baseURL strips a /clusters/<path> suffix from a kcp host URL.
func baseURL(host string) (string, error) {
	i := strings.Index(host, "/clusters/")
	if i < 0 {
		return strings.TrimSuffix(host, "/"), nil
	}
	if i == 0 {
		return "", fmt.Errorf("host %q has no scheme and address", host)
	}
	return host[:i], nil
}

// URL is kcp's base URL, https://127.0.0.1:<port>, without a workspace path.
func (k *KCP) URL() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return "https://127.0.0.1:" + strconv.Itoa(k.port)
}

// AdminConfig returns admin access to the root workspace (a new copy on each call):
// a user in kcp's global admin group system:kcp:admin, whose token stays valid
// across Restart.
func (k *KCP) AdminConfig() *rest.Config {
	k.mu.Lock()
	defer k.mu.Unlock()
	return rest.CopyConfig(k.admin)
}

// ConfigFor returns admin access to the workspace at path (for example
// root:provider) or to a logical cluster by name: kcp accepts both after /clusters/.
func (k *KCP) ConfigFor(path logicalcluster.Path) *rest.Config {
	cfg := k.AdminConfig()
	base, _ := baseURL(cfg.Host) // the admin host always carries the address
	cfg.Host = base + path.RequestPath()
	return cfg
}

// Stop stops kcp (SIGTERM, SIGKILL after 30 s). Its files stay until the test's
// cleanup, so Restart can bring it back. Stopping a stopped kcp does nothing.
func (k *KCP) Stop() error { return k.stopWithin(kcpStopGrace) }

func (k *KCP) stopWithin(grace time.Duration) error {
	k.mu.Lock()
	proc := k.proc
	k.mu.Unlock()
	if proc == nil {
		return nil
	}
	if err := proc.stop(grace); err != nil {
		return fmt.Errorf("stopping kcp: %w", err)
	}
	return nil
}

// Restart stops kcp and starts it again with the same root directory, ports and
// arguments, then waits until it is ready. Clients keep their configs: the address,
// the serving certificate and the admin token stay the same.
func (k *KCP) Restart(t testing.TB) {
	t.Helper()
	// kcp holding clients' watches open may outlast a short grace period; being
	// killed then is a harder stop, still a restart.
	var killed *killedError
	if err := k.stopWithin(10 * time.Second); errors.As(err, &killed) {
		t.Logf("kcp %v before the restart", killed)
	} else if err != nil {
		t.Fatalf("restarting kcp: %v", err)
	}
	start := time.Now()
	if err := k.start(); err != nil {
		logTail(t, "kcp", k.logPath)
		t.Fatalf("restarting kcp: %v", err)
	}
	t.Logf("kcp restarted in %s", time.Since(start).Round(100*time.Millisecond))
}

// portTaken reports whether kcp's log of the latest start says a port was in use.
func (k *KCP) portTaken() bool {
	data, err := os.ReadFile(k.logPath)
	if err != nil {
		return false
	}
	log := string(data)
	if i := strings.LastIndex(log, startMarker); i >= 0 {
		log = log[i:]
	}
	return strings.Contains(log, "address already in use")
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago. They
// are held open together so the kernel does not hand out one twice.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail prints the end of a server's log to the test output.
func logTail(t testing.TB, name, path string) {
	t.Helper()
	const maxBytes, maxLines = 16 << 10, 60
	f, err := os.Open(path)
	if err != nil {
		t.Logf("no %s log: %v", name, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Logf("reading %s log: %v", name, err)
		return
	}
	offset := max(fi.Size()-maxBytes, 0)
	buf := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("reading %s log: %v", name, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if offset > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	t.Logf("last %d lines of the %s log (%s):\n%s", len(lines), name, path, strings.Join(lines, "\n"))
}
