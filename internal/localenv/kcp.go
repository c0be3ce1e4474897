package localenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

const (
	// kcpStartTimeout bounds the wait for /readyz. kcp needs about 30 s on an idle
	// two-core machine; the margin covers a machine shared with other runs.
	kcpStartTimeout = 3 * time.Minute
	// kcpStopGrace is how long kcp may take to shut down before it is killed.
	kcpStopGrace = 30 * time.Second
	// kcpStartAttempts bounds retries when a free port was taken between picking it
	// and kcp binding it (another process on the machine may do the same).
	kcpStartAttempts = 3
	// startMarker begins the log of each start of kcp in its log file.
	startMarker = "=== localenv: starting "
)

// adminUser is the local kcp administrator, authenticated by a static token in kcp's
// global admin group. Why not kcp's own admin.kubeconfig: kcp-admin gets a new token
// at every start, which would break configs handed out before a Restart, and
// shard-admin is in system:masters, whose workspaces kcp creates without an owner, so
// their default APIBindings are never initialised and they never become Ready.
const (
	adminUser  = "local-admin"
	adminGroup = "system:kcp:admin"
)

// KCP is a running kcp server: one shard with embedded etcd, or (KCPOptions.Shards)
// several shards with kcp's cache server and front-proxy.
type KCP struct {
	// Log is kcp's log file.
	Log string

	env       *Env
	dir       string // root directory, token file
	rootDir   string
	tokenFile string
	token     string
	opts      KCPOptions

	mu     sync.Mutex
	port   int      // secure port, kept across Restart
	args   []string // arguments of the current ports, kept across Restart
	proc   *Process
	caData []byte
	// sharded holds the processes of a sharded kcp; nil for one shard.
	sharded *sharded
}

// KCPOptions configure StartKCP.
type KCPOptions struct {
	// FeatureGates, e.g. "GlobalServiceAccount=true" (lets a ServiceAccount of one
	// workspace be named as a user in another).
	FeatureGates []string
	// Args are appended to `kcp start` (of every shard).
	Args []string
	// Shards, when 2 or more, starts a sharded kcp: a root shard and Shards-1 more
	// (ShardName), kcp's cache server and its front-proxy, which URL and ConfigFor
	// then reach. Restart is not supported then.
	Shards int
}

// StartKCP starts `kcp start` with its root directory in <dir>/kcp, on free ports of
// 127.0.0.1, and returns once /readyz answers 200.
func (e *Env) StartKCP(ctx context.Context, opts KCPOptions) (*KCP, error) {
	k := &KCP{env: e, opts: opts, dir: filepath.Join(e.Dir, "kcp"), Log: e.LogPath("kcp")}
	k.rootDir = filepath.Join(k.dir, "root")
	k.tokenFile = filepath.Join(k.dir, "tokens.csv")
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating kcp's folder: %w", err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generating the kcp admin token: %w", err)
	}
	k.token = hex.EncodeToString(b)
	// --token-auth-file: token,user,uid,"group"
	if err := os.WriteFile(k.tokenFile, fmt.Appendf(nil, "%s,%s,%s,%q\n", k.token, adminUser, adminUser, adminGroup), 0o600); err != nil {
		return nil, fmt.Errorf("writing the kcp token file: %w", err)
	}
	// Registered before the start, so a failed or interrupted start is stopped too.
	e.onStop("kcp", k.Stop)
	if opts.Shards > 1 {
		for attempt := 1; ; attempt++ {
			err := k.startSharded(ctx)
			if err == nil {
				return k, nil
			}
			if attempt < kcpStartAttempts && k.shardedPortTaken() {
				if rerr := k.resetSharded(); rerr != nil {
					return nil, fmt.Errorf("starting a sharded kcp: %w (and clearing for another attempt: %w)", err, rerr)
				}
				continue
			}
			return nil, fmt.Errorf("starting a sharded kcp: %w", err)
		}
	}
	for attempt := 1; ; attempt++ {
		err := k.startOnFreePorts(ctx)
		if err == nil {
			return k, nil
		}
		if attempt < kcpStartAttempts && k.portTaken() {
			continue
		}
		return nil, fmt.Errorf("starting kcp: %w\n%s", err, LogTail(k.Log, 20))
	}
}

// startOnFreePorts picks new ports and starts kcp with an empty root directory.
func (k *KCP) startOnFreePorts(ctx context.Context) error {
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	// A previous attempt may have initialised etcd with other ports.
	if err := os.RemoveAll(k.rootDir); err != nil {
		return fmt.Errorf("clearing the root directory: %w", err)
	}
	if err := os.MkdirAll(k.rootDir, 0o700); err != nil {
		return fmt.Errorf("creating the root directory: %w", err)
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
	if len(k.opts.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(k.opts.FeatureGates, ","))
	}
	args = append(args, k.opts.Args...)
	k.mu.Lock()
	k.port, k.args = ports[0], args
	k.mu.Unlock()
	return k.start(ctx)
}

// start runs kcp with the current arguments and waits for /readyz.
func (k *KCP) start(ctx context.Context) error {
	k.mu.Lock()
	args := k.args
	k.mu.Unlock()
	binary := filepath.Join(k.env.Assets, "kcp")
	logFile, err := k.env.openLog("kcp")
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "%s%s %s\n", startMarker, binary, strings.Join(args, " "))
	_ = logFile.Close()

	cmd := exec.Command(binary, args...)
	cmd.Dir = k.dir
	proc, err := k.env.startProcess("kcp", cmd)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.proc = proc
	k.mu.Unlock()
	if err := k.waitReady(ctx, proc); err != nil {
		// Leave nothing half-started behind; the error says what happened.
		_ = proc.Stop(5 * time.Second)
		return err
	}
	return nil
}

// waitReady polls /readyz with kcp's CA (from the admin.kubeconfig it writes at
// start-up) and the Env's own admin token.
func (k *KCP) waitReady(ctx context.Context, proc *Process) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, kcpStartTimeout, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("kcp exited before it was ready: %w", proc.Ended())
		}
		raw, err := clientcmd.LoadFromFile(filepath.Join(k.rootDir, "admin.kubeconfig"))
		if err != nil {
			last = "admin.kubeconfig not written yet"
			return false, nil
		}
		base := raw.Clusters["base"]
		if base == nil || len(base.CertificateAuthorityData) == 0 {
			last = "admin.kubeconfig has no CA yet"
			return false, nil
		}
		k.mu.Lock()
		k.caData = base.CertificateAuthorityData
		k.mu.Unlock()
		status, err := get(ctx, k.AdminConfig(), "/readyz")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if status != http.StatusOK {
			last = fmt.Sprintf("/readyz answered %d", status)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if proc.Exited() {
			return fmt.Errorf("kcp exited before it was ready: %w", proc.Ended())
		}
		return fmt.Errorf("kcp not ready within %s (last: %s): %w", kcpStartTimeout, last, err)
	}
	return nil
}

// portTaken reports whether kcp's log of the latest start says a port was in use.
func (k *KCP) portTaken() bool {
	data, err := os.ReadFile(k.Log)
	if err != nil {
		return false
	}
	log := string(data)
	if i := strings.LastIndex(log, startMarker); i >= 0 {
		log = log[i:]
	}
	return strings.Contains(log, "address already in use")
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
	return k.ConfigFor(logicalcluster.NewPath("root"))
}

// ConfigFor returns admin access to the workspace at path (for example
// root:provider) or to a logical cluster by name: kcp accepts both after /clusters/.
func (k *KCP) ConfigFor(path logicalcluster.Path) *rest.Config {
	k.mu.Lock()
	ca := k.caData
	k.mu.Unlock()
	cfg := &rest.Config{
		Host:            k.URL() + path.RequestPath(),
		BearerToken:     k.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
	}
	// Callers create workspaces and bindings in bursts; client-go's default of 5 QPS
	// would make them wait on the client instead of kcp.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// Kubeconfig renders an admin kubeconfig with one context per workspace path
// (context name -> path); current names the current context.
func (k *KCP) Kubeconfig(contexts map[string]string, current string) ([]byte, error) {
	k.mu.Lock()
	ca := k.caData
	k.mu.Unlock()
	servers := make(map[string]kubeconfig.Server, len(contexts))
	for name, path := range contexts {
		servers[name] = kubeconfig.Server{URL: k.URL() + "/clusters/" + path, CAData: ca}
	}
	return kubeconfig.RenderContexts("admin", k.token, servers, current)
}

// Stop stops kcp (SIGTERM, SIGKILL after 30 s). Its files stay, so Restart can bring
// it back. Stopping a stopped kcp does nothing.
func (k *KCP) Stop() error { return k.stopWithin(kcpStopGrace) }

func (k *KCP) stopWithin(grace time.Duration) error {
	k.mu.Lock()
	proc, sharded := k.proc, k.sharded
	k.mu.Unlock()
	if sharded != nil {
		return sharded.stop(func(p *Process) error { return p.Stop(grace) })
	}
	if proc == nil {
		return nil
	}
	if err := proc.Stop(grace); err != nil {
		return fmt.Errorf("stopping kcp: %w", err)
	}
	return nil
}

// Exited is closed when a kcp process running now ends (for a sharded kcp, any of
// its processes), with the reason in ExitErr; a long-running starter such as `local`
// reports that instead of leaving clients to find a closed port.
func (k *KCP) Exited() <-chan struct{} {
	procs := k.procs()
	if len(procs) == 1 {
		return procs[0].Done()
	}
	out := make(chan struct{})
	var once sync.Once
	for _, p := range procs {
		go func() {
			<-p.Done()
			once.Do(func() { close(out) })
		}()
	}
	return out
}

// ExitErr says why a process Exited watches ended, with the tail of kcp's log; nil
// while they all run.
func (k *KCP) ExitErr() error {
	for _, p := range k.procs() {
		if p.Exited() {
			return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.Name, p.Ended(), p.Log, LogTail(p.Log, 30))
		}
	}
	return nil
}

func (k *KCP) procs() []*Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sharded != nil {
		return slices.Clone(k.sharded.procs)
	}
	return []*Process{k.proc}
}

// Restart stops kcp and starts it again with the same root directory, ports and
// arguments, then waits until it is ready. Clients keep their configs: the address,
// the serving certificate and the admin token stay the same.
func (k *KCP) Restart(ctx context.Context) error {
	if k.sharded != nil {
		return errors.New("restarting a sharded kcp is not supported")
	}
	// kcp holding clients' watches open may outlast a short grace period; being
	// killed then is a harder stop, still a restart.
	var killed *KilledError
	if err := k.stopWithin(10 * time.Second); err != nil && !errors.As(err, &killed) {
		return fmt.Errorf("restarting kcp: %w", err)
	}
	if err := k.start(ctx); err != nil {
		return fmt.Errorf("restarting kcp: %w\n%s", err, LogTail(k.Log, 20))
	}
	return nil
}

// get performs an authenticated GET on the server behind cfg (workspace path
// stripped) and returns the status code.
func get(ctx context.Context, cfg *rest.Config, path string) (int, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, fmt.Errorf("building HTTP client: %w", err)
	}
	hc.Timeout = 5 * time.Second
	base := cfg.Host
	if i := strings.Index(base, "/clusters/"); i >= 0 {
		base = base[:i]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
