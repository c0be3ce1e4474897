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
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// kcpStopGrace is how long kcp may take to shut down before it is killed.
const kcpStopGrace = 30 * time.Second

// adminUser is the local kcp administrator, authenticated by a static token in kcp's
// global admin group. Why not kcp's own admin.kubeconfig: kcp-admin gets a new token
// at every start, and shard-admin is in system:masters, whose workspaces kcp creates
// without an owner so that they never become Ready.
const (
	adminUser  = "local-admin"
	adminGroup = "system:kcp:admin"
)

// KCP is a running kcp server.
type KCP struct {
	// URL is the base URL, https://127.0.0.1:<port>, without a workspace path.
	URL string

	caData []byte
	token  string
	proc   *Process
}

// KCPOptions configure StartKCP.
type KCPOptions struct {
	// FeatureGates, e.g. "GlobalServiceAccount=true".
	FeatureGates []string
	// Timeout bounds the wait for /readyz. Default 3 minutes.
	Timeout time.Duration
}

// StartKCP starts `kcp start` with its root directory in the state folder, on free
// ports of 127.0.0.1, and returns once /readyz answers 200.
func (e *Env) StartKCP(ctx context.Context, opts KCPOptions) (*KCP, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Minute
	}
	dir := filepath.Join(e.Dir, "kcp")
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating kcp root directory: %w", err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generating the kcp admin token: %w", err)
	}
	k := &KCP{token: hex.EncodeToString(b)}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, fmt.Appendf(nil, "%s,%s,%s,%q\n", k.token, adminUser, adminUser, adminGroup), 0o600); err != nil {
		return nil, fmt.Errorf("writing the kcp token file: %w", err)
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	args := []string{
		"start",
		"--root-directory=" + root,
		"--bind-address=127.0.0.1",
		"--external-hostname=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--embedded-etcd-client-port=" + strconv.Itoa(ports[1]),
		"--embedded-etcd-peer-port=" + strconv.Itoa(ports[2]),
		"--token-auth-file=" + tokenFile,
	}
	if len(opts.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(opts.FeatureGates, ","))
	}
	cmd := exec.Command(filepath.Join(e.Assets, "kcp"), args...)
	cmd.Dir = dir
	k.proc, err = e.startProcess("kcp", e.LogPath("kcp"), cmd)
	if err != nil {
		return nil, err
	}
	e.onStop("kcp", func() error { return k.proc.Stop(kcpStopGrace) })
	k.URL = "https://127.0.0.1:" + strconv.Itoa(ports[0])

	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		if k.proc.Err() != nil || isClosed(k.proc.Done()) {
			return false, fmt.Errorf("kcp exited before it was ready: %v", k.proc.Err())
		}
		raw, err := clientcmd.LoadFromFile(filepath.Join(root, "admin.kubeconfig"))
		if err != nil {
			last = "admin.kubeconfig not written yet"
			return false, nil
		}
		base := raw.Clusters["base"]
		if base == nil || len(base.CertificateAuthorityData) == 0 {
			last = "admin.kubeconfig has no CA yet"
			return false, nil
		}
		k.caData = base.CertificateAuthorityData
		status, err := get(ctx, k.ConfigFor("root"), "/readyz")
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
		return nil, fmt.Errorf("kcp not ready (last: %s): %w\n%s", last, err, LogTail(k.proc.Log, 20))
	}
	return k, nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ConfigFor returns admin access to the workspace at path (e.g. root:providers).
func (k *KCP) ConfigFor(path string) *rest.Config {
	cfg := &rest.Config{
		Host:            k.URL + "/clusters/" + path,
		BearerToken:     k.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.caData},
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// Kubeconfig writes an admin kubeconfig with one context per workspace path
// (context name -> path); current names the current context.
func (k *KCP) Kubeconfig(contexts map[string]string, current string) ([]byte, error) {
	servers := make(map[string]kubeconfig.Server, len(contexts))
	for name, path := range contexts {
		servers[name] = kubeconfig.Server{URL: k.URL + "/clusters/" + path, CAData: k.caData}
	}
	return kubeconfig.RenderContexts("admin", k.token, servers, current)
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
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// errNoSetpriv says why envtest servers cannot be tied to the command's lifetime.
var errNoSetpriv = errors.New("setpriv (util-linux) not found in PATH; it makes etcd and kube-apiserver die with the command")
