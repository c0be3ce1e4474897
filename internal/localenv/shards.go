// One file, one idea: a sharded kcp (root shard, shards, cache server, front-proxy)
// and the certificates that tie them together.

package localenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// ShardName is the name of the i-th shard of a sharded kcp: "root", then "shard-1",
// "shard-2", ... A Workspace is placed on one with the location selector
// name=<ShardName> (CreateWorkspaceOn).
func ShardName(i int) string {
	if i == 0 {
		return "root"
	}
	return fmt.Sprintf("shard-%d", i)
}

// sharded are the processes of a sharded kcp, in start order: kcp's cache server,
// the shards (the root shard first), the front-proxy.
type sharded struct {
	procs []*Process
	// shardURLs are the shards' own base URLs, by index.
	shardURLs []string
	// clientCA is the authority every shard and the front-proxy trust for client
	// certificates; pki is where its certificates are written.
	clientCA *authority
	pki      string
}

// startSharded starts kcp as a platform runs it at scale: a cache server that every
// shard replicates through, Shards kcp processes (a root shard and the others), and
// kcp's front-proxy in front of them, which routes /clusters/<workspace> to the shard
// holding it. The wiring (three CAs, a ServiceAccount signing key shared by all
// shards, the admin kubeconfigs) follows kcp v0.30.0's own sharded test server.
// k.port becomes the front-proxy's port: URL and ConfigFor reach kcp through it.
func (k *KCP) startSharded(ctx context.Context) error {
	n := k.opts.Shards
	ports, err := FreePorts(4 + 3*n)
	if err != nil {
		return err
	}
	take := func() int { p := ports[0]; ports = ports[1:]; return p }
	pki := filepath.Join(k.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	clientCA, err := newAuthority(pki, "client-ca", "kcp-client-ca")
	if err != nil {
		return err
	}
	servingCA, err := newAuthority(pki, "serving-ca", "kcp-serving-ca")
	if err != nil {
		return err
	}
	// The front-proxy forwards a request with the caller's identity in headers; the
	// shards believe those headers from a client certificate of this CA only.
	requestHeaderCA, err := newAuthority(pki, "requestheader-ca", "kcp-front-proxy-requestheader-ca")
	if err != nil {
		return err
	}
	saKey, saPub, err := signingKey(pki, "service-account")
	if err != nil {
		return err
	}
	shardAdmin, err := clientCA.client(pki, "shard-admin", "shard-admin", "system:masters")
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.caData = servingCA.PEM()
	k.port = take()
	k.sharded = &sharded{clientCA: clientCA, pki: pki}
	k.mu.Unlock()
	proxyURL := k.URL()

	cacheKubeconfig, err := k.startCacheServer(ctx, take(), take(), take())
	if err != nil {
		return err
	}
	adminKubeconfigs := map[string]struct {
		group, url string
	}{
		"logical-cluster-admin":          {"system:kcp:logical-cluster-admin", ""}, // the root shard's URL, below
		"external-logical-cluster-admin": {"system:kcp:external-logical-cluster-admin", proxyURL},
	}
	var rootURL string
	for i := range n {
		name := ShardName(i)
		dir := filepath.Join(k.dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		port, etcdClient, etcdPeer := take(), take(), take()
		url := "https://127.0.0.1:" + strconv.Itoa(port)
		if i == 0 {
			rootURL = url
			for file, a := range adminKubeconfigs {
				server := cmp.Or(a.url, rootURL)
				kp, err := clientCA.client(pki, file, file, a.group)
				if err != nil {
					return err
				}
				if err := writeKubeconfig(filepath.Join(pki, file+".kubeconfig"), server, servingCA.PEM(), kp); err != nil {
					return err
				}
			}
		}
		serving, err := servingCA.serve(dir, "apiserver")
		if err != nil {
			return err
		}
		shardClient, err := clientCA.client(dir, "shard-client", "kcp-shard-"+name, "system:masters")
		if err != nil {
			return err
		}
		args := []string{
			"start",
			"--root-directory=" + dir,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--embedded-etcd-client-port=" + strconv.Itoa(etcdClient),
			"--embedded-etcd-peer-port=" + strconv.Itoa(etcdPeer),
			"--token-auth-file=" + k.tokenFile,
			"--client-ca-file=" + clientCA.File,
			"--requestheader-client-ca-file=" + requestHeaderCA.File,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--service-account-key-file=" + saPub,
			"--service-account-private-key-file=" + saKey,
			"--service-account-signing-key-file=" + saKey,
			// A ServiceAccount token is checked by whichever shard a request reaches
			// (a virtual workspace on another shard than the account's workspace):
			// the shared signing key vouches for it, a lookup could not.
			"--service-account-lookup=false",
			"--shard-external-url=" + proxyURL,
			"--tls-cert-file=" + serving.CertFile,
			"--tls-private-key-file=" + serving.KeyFile,
			"--logical-cluster-admin-kubeconfig=" + filepath.Join(pki, "logical-cluster-admin.kubeconfig"),
			"--external-logical-cluster-admin-kubeconfig=" + filepath.Join(pki, "external-logical-cluster-admin.kubeconfig"),
			"--shard-client-cert-file=" + shardClient.CertFile,
			"--shard-client-key-file=" + shardClient.KeyFile,
			"--shard-virtual-workspace-ca-file=" + servingCA.File,
			"--cache-kubeconfig=" + cacheKubeconfig,
		}
		if i > 0 {
			// The root shard wrote its admin kubeconfig when it started; its
			// "shard-base" context is a system:masters identity on it.
			args = append(args, "--shard-name="+name, "--root-shard-kubeconfig-file="+filepath.Join(k.dir, ShardName(0), "admin.kubeconfig"))
		}
		if len(k.opts.FeatureGates) > 0 {
			args = append(args, "--feature-gates="+strings.Join(k.opts.FeatureGates, ","))
		}
		args = append(args, k.opts.Args...)
		if err := k.startPart(ctx, "kcp-"+name, "kcp", dir, args, url, "/readyz"); err != nil {
			return err
		}
		k.sharded.shardURLs = append(k.sharded.shardURLs, url)
	}
	return k.startFrontProxy(ctx, pki, rootURL, servingCA, clientCA, requestHeaderCA, shardAdmin)
}

// startCacheServer starts kcp's cache server and returns the kubeconfig the shards
// reach it with. kcp v0.30.0's cache server serves with a certificate it signs itself
// and checks no client (v0.30.2 added client certificates).
func (k *KCP) startCacheServer(ctx context.Context, port, etcdClient, etcdPeer int) (string, error) {
	dir := filepath.Join(k.dir, "cache")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	url := "https://localhost:" + strconv.Itoa(port)
	args := []string{
		"--root-directory=" + dir,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--embedded-etcd-client-port=" + strconv.Itoa(etcdClient),
		"--embedded-etcd-peer-port=" + strconv.Itoa(etcdPeer),
		"--synthetic-delay=0s",
	}
	if err := k.startPart(ctx, "kcp-cache", "cache-server", dir, args, url, "/readyz"); err != nil {
		return "", err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
	if err != nil {
		return "", fmt.Errorf("the cache server's certificate: %w", err)
	}
	file := filepath.Join(dir, "cache.kubeconfig")
	return file, writeKubeconfig(file, url, ca, nil)
}

// startFrontProxy starts kcp's front-proxy on k.port. It finds each workspace's shard
// through the shards (shards.kubeconfig: the Shard objects' URLs with a
// system:masters client certificate), serves /clusters/ and /services/ (virtual
// workspaces: the root shard's only; each shard's are reached directly), and passes
// bearer tokens through to the shard, which checks them.
func (k *KCP) startFrontProxy(ctx context.Context, pki, rootURL string, servingCA, clientCA, requestHeaderCA *authority, shardAdmin *keyPair) error {
	dir := filepath.Join(k.dir, "front-proxy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	serving, err := servingCA.serve(dir, "apiserver")
	if err != nil {
		return err
	}
	forwarder, err := requestHeaderCA.client(dir, "requestheader", "kcp-front-proxy")
	if err != nil {
		return err
	}
	var mapping []map[string]string
	for _, path := range []string{"/services/", "/clusters/"} {
		mapping = append(mapping, map[string]string{
			"path": path, "backend": rootURL, "backend_server_ca": servingCA.File,
			"proxy_client_cert": forwarder.CertFile, "proxy_client_key": forwarder.KeyFile,
		})
	}
	raw, err := yaml.Marshal(mapping)
	if err != nil {
		return err
	}
	mappingFile := filepath.Join(dir, "mapping.yaml")
	if err := os.WriteFile(mappingFile, raw, 0o600); err != nil {
		return err
	}
	rootKubeconfig, shardsKubeconfig := filepath.Join(dir, "root.kubeconfig"), filepath.Join(dir, "shards.kubeconfig")
	for _, file := range []string{rootKubeconfig, shardsKubeconfig} {
		if err := writeKubeconfig(file, rootURL, servingCA.PEM(), shardAdmin); err != nil {
			return err
		}
	}
	args := []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(k.port),
		"--root-directory=" + dir,
		"--mapping-file=" + mappingFile,
		"--root-kubeconfig=" + rootKubeconfig,
		"--shards-kubeconfig=" + shardsKubeconfig,
		"--client-ca-file=" + clientCA.File,
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
	}
	// The front-proxy's /readyz is always OK; it serves once it has indexed the
	// shards, which a workspace request through it tells.
	return k.startPart(ctx, "kcp-front-proxy", "kcp-front-proxy", dir, args, k.URL(), "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces")
}

// startPart starts one process of a sharded kcp and waits until a GET of path on url,
// with the admin token, answers 200.
func (k *KCP) startPart(ctx context.Context, name, binary, dir string, args []string, url, path string) error {
	bin := filepath.Join(k.env.Assets, binary)
	logFile, err := k.env.openLog(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "%s%s %s\n", startMarker, bin, strings.Join(args, " "))
	_ = logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	proc, err := k.env.startProcess(name, cmd)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.sharded.procs = append(k.sharded.procs, proc)
	k.mu.Unlock()
	cfg := &rest.Config{Host: url, BearerToken: k.token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if strings.HasPrefix(url, "https://127.0.0.1") {
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: k.caData}
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, PollInterval, kcpStartTimeout, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("%s exited: %w", name, proc.Ended())
		}
		status, err := get(ctx, cfg, path)
		switch {
		case err != nil:
			last = err.Error()
		case status != http.StatusOK:
			last = fmt.Sprintf("%s answered %d", path, status)
		}
		return err == nil && status == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready within %s (last: %s): %w\n%s", name, kcpStartTimeout, last, err, LogTail(proc.Log, 20))
	}
	return nil
}

// shardedPortTaken reports whether a part of the sharded kcp could not bind a port
// (another process took it between FreePorts and the bind).
func (k *KCP) shardedPortTaken() bool {
	k.mu.Lock()
	s := k.sharded
	k.mu.Unlock()
	if s == nil {
		return false
	}
	for _, p := range s.procs {
		if data, err := os.ReadFile(p.Log); err == nil && strings.Contains(string(data), "address already in use") {
			return true
		}
	}
	return false
}

// resetSharded stops what a failed start of a sharded kcp started and removes its
// files, for another attempt on other ports.
func (k *KCP) resetSharded() error {
	if err := k.stopWithin(5 * time.Second); err != nil {
		var killed *KilledError
		if !errors.As(err, &killed) {
			return err
		}
	}
	k.mu.Lock()
	k.sharded = nil
	k.mu.Unlock()
	for _, dir := range []string{"pki", "cache", "front-proxy"} {
		if err := os.RemoveAll(filepath.Join(k.dir, dir)); err != nil {
			return err
		}
	}
	for i := range k.opts.Shards {
		if err := os.RemoveAll(filepath.Join(k.dir, ShardName(i))); err != nil {
			return err
		}
	}
	return nil
}

// ShardConfig returns admin access to shard i directly (not through the
// front-proxy), for example to reach its virtual workspaces; nil for a kcp of one
// shard.
func (k *KCP) ShardConfig(i int) *rest.Config {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sharded == nil || i >= len(k.sharded.shardURLs) {
		return nil
	}
	return &rest.Config{Host: k.sharded.shardURLs[i], BearerToken: k.token, TLSClientConfig: rest.TLSClientConfig{CAData: k.caData}}
}

// Sharded says whether this kcp has several shards.
func (k *KCP) Sharded() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sharded != nil
}

// ClientCertificateKubeconfig returns a kubeconfig of the workspace at path, through
// the front-proxy, for user in groups, authenticated by a client certificate of kcp's
// client CA: an identity every shard accepts. Only a sharded kcp has the CA.
func (k *KCP) ClientCertificateKubeconfig(path, user string, groups ...string) ([]byte, error) {
	k.mu.Lock()
	s, ca := k.sharded, k.caData
	k.mu.Unlock()
	if s == nil {
		return nil, errors.New("a kcp of one shard signs no client certificates here")
	}
	kp, err := s.clientCA.client(s.pki, "user-"+strings.NewReplacer(":", "-", "/", "-").Replace(user), user, groups...)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kcp"] = &clientcmdapi.Cluster{Server: k.URL() + "/clusters/" + path, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.Cert, ClientKeyData: kp.Key}
	cfg.Contexts["kcp"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: user}
	cfg.CurrentContext = "kcp"
	return clientcmd.Write(*cfg)
}

// stopSharded stops the processes of a sharded kcp, the last started first.
func (s *sharded) stop(grace func(*Process) error) error {
	var first error
	for i := len(s.procs) - 1; i >= 0; i-- {
		if err := grace(s.procs[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writeKubeconfig writes a kubeconfig for server with one context, "base" (the name
// kcp's flags expect), authenticated by kp's client certificate, or by nothing.
func writeKubeconfig(file, server string, ca []byte, kp *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["base"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	user := &clientcmdapi.AuthInfo{}
	if kp != nil {
		user.ClientCertificateData, user.ClientKeyData = kp.Cert, kp.Key
	}
	cfg.AuthInfos["base"] = user
	cfg.Contexts["base"] = &clientcmdapi.Context{Cluster: "base", AuthInfo: "base"}
	cfg.CurrentContext = "base"
	return clientcmd.WriteToFile(*cfg, file)
}
