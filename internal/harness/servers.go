package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// The openMCP cluster purposes an APIServer can stand in for (see localenv).
const (
	PurposePlatform   = localenv.PurposePlatform
	PurposeOnboarding = localenv.PurposeOnboarding
	PurposeWorkload   = localenv.PurposeWorkload
	PurposeMCP        = localenv.PurposeMCP
)

// APIServer is a Kubernetes API server standing in for one openMCP cluster.
type APIServer struct {
	*localenv.APIServer
	// Purpose is the openMCP purpose the server stands in for.
	Purpose string
	// Client is an admin client using the harness Scheme.
	Client client.Client
}

// APIServerOption configures StartAPIServer.
type APIServerOption func(*[]*apiextensionsv1.CustomResourceDefinition)

// WithCRDs installs CRDs in addition to the openMCP ones of the purpose, for example
// a service provider's Service API. StartAPIServer returns once they are served.
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) APIServerOption {
	return func(c *[]*apiextensionsv1.CustomResourceDefinition) { *c = append(*c, crds...) }
}

// StartAPIServer starts a Kubernetes API server for an openMCP cluster purpose
// (PurposePlatform, PurposeOnboarding, PurposeWorkload or PurposeMCP; start several
// for several MCPs). It installs the openMCP CRDs labelled with that purpose (from
// openmcp-operator's api/crds) and the CRDs of WithCRDs. t.Cleanup stops it.
func StartAPIServer(t testing.TB, purpose string, opts ...APIServerOption) *APIServer {
	t.Helper()
	if !slices.Contains([]string{PurposePlatform, PurposeOnboarding, PurposeWorkload, PurposeMCP}, purpose) {
		t.Fatalf("StartAPIServer: unknown cluster purpose %q", purpose)
	}
	crds, err := localenv.OpenMCPCRDs(purpose)
	if err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	for _, o := range opts {
		o(&crds)
	}
	start := time.Now()
	s, err := NewEnv(t, "apiserver-"+purpose).StartAPIServer(purpose, crds)
	if err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	t.Logf("%s API server ready at %s after %s", purpose, s.Config.Host, time.Since(start).Round(100*time.Millisecond))
	return wrapAPIServer(t, s)
}

func wrapAPIServer(t testing.TB, s *localenv.APIServer) *APIServer {
	t.Helper()
	if s == nil {
		return nil
	}
	return &APIServer{APIServer: s, Purpose: s.Name, Client: NewClient(t, s.Config)}
}

// KCP is a kcp server (one shard, embedded etcd) started by StartKCP. Its methods
// fail the test instead of returning errors.
type KCP struct {
	*localenv.KCP
}

// KCPOption configures StartKCP.
type KCPOption func(*localenv.KCPOptions)

// WithFeatureGates enables kcp feature gates, e.g. "GlobalServiceAccount=true"
// (lets a ServiceAccount of one workspace be named as a user in another).
func WithFeatureGates(gates ...string) KCPOption {
	return func(o *localenv.KCPOptions) { o.FeatureGates = append(o.FeatureGates, gates...) }
}

// WithKCPArgs appends arguments to `kcp start`.
func WithKCPArgs(args ...string) KCPOption {
	return func(o *localenv.KCPOptions) { o.Args = append(o.Args, args...) }
}

// WithShards starts a sharded kcp of n shards (localenv.KCPOptions.Shards).
func WithShards(n int) KCPOption {
	return func(o *localenv.KCPOptions) { o.Shards = n }
}

// StartKCP starts `kcp start` with its own root directory on free ports of
// 127.0.0.1 and waits until it is ready. t.Cleanup stops it.
func StartKCP(t testing.TB, opts ...KCPOption) *KCP {
	t.Helper()
	var o localenv.KCPOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	k, err := NewEnv(t, "kcp").StartKCP(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kcp ready at %s after %s", k.URL(), time.Since(start).Round(100*time.Millisecond))
	return &KCP{k}
}

// Restart stops kcp and starts it again with the same root directory, ports and
// arguments; configs handed out before keep working.
func (k *KCP) Restart(t testing.TB) {
	t.Helper()
	start := time.Now()
	if err := k.KCP.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("kcp restarted in %s", time.Since(start).Round(100*time.Millisecond))
}

// ClientFor returns a controller-runtime client with admin access to the workspace
// at path, using the harness Scheme.
func (k *KCP) ClientFor(t testing.TB, path logicalcluster.Path) client.Client {
	t.Helper()
	return NewClient(t, k.ConfigFor(path))
}

// CreateWorkspace is localenv's KCP.CreateWorkspace, failing the test on error.
func (k *KCP) CreateWorkspace(ctx context.Context, t testing.TB, parent logicalcluster.Path, name string) (logicalcluster.Path, logicalcluster.Name) {
	t.Helper()
	path, lc, err := k.KCP.CreateWorkspace(ctx, parent, name)
	if err != nil {
		t.Fatal(err)
	}
	return path, lc
}

// CreateWorkspaceOn is localenv's KCP.CreateWorkspaceOn, failing the test on error.
func (k *KCP) CreateWorkspaceOn(ctx context.Context, t testing.TB, parent logicalcluster.Path, name, shard string) (logicalcluster.Path, logicalcluster.Name) {
	t.Helper()
	path, lc, err := k.KCP.CreateWorkspaceOn(ctx, parent, name, shard)
	if err != nil {
		t.Fatal(err)
	}
	return path, lc
}

// CreateAPIBinding is localenv's KCP.CreateAPIBinding, failing the test on error.
func (k *KCP) CreateAPIBinding(ctx context.Context, t testing.TB, consumer logicalcluster.Path, bindingName string,
	exportPath logicalcluster.Path, exportName string, claims []apisv1alpha2.AcceptablePermissionClaim,
) *apisv1alpha2.APIBinding {
	t.Helper()
	b, err := k.KCP.CreateAPIBinding(ctx, consumer, bindingName, exportPath, exportName, claims)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// VirtualWorkspaceURLs is localenv's KCP.VirtualWorkspaceURLs, failing the test on
// error.
func (k *KCP) VirtualWorkspaceURLs(ctx context.Context, t testing.TB, provider logicalcluster.Path, endpointSliceName string) []string {
	t.Helper()
	urls, err := k.KCP.VirtualWorkspaceURLs(ctx, provider, endpointSliceName)
	if err != nil {
		t.Fatal(err)
	}
	return urls
}

// Process is a process the test started, for example the runtime run as a copy of
// the test binary (see StartTestChild), or the project's binary.
type Process struct {
	*localenv.Process
}

// StartProcess runs path with args and the environment of the test binary plus env
// (replacing variables of the same name), its output in a log file. The process dies
// with the test binary (parent-death signal), and the end of the test stops it
// (SIGTERM, SIGKILL after grace).
func StartProcess(t testing.TB, name, path string, args []string, grace time.Duration, env ...string) *Process {
	t.Helper()
	p, err := NewEnv(t, name).StartProcess(name, path, args, env, grace)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return &Process{p}
}

// StartTestChild runs this test binary again with only the test named test, the
// environment of the parent plus env, and its output in a log file. Kill or the end
// of the test kills it.
func StartTestChild(t testing.TB, test string, env ...string) *Process {
	t.Helper()
	return StartProcess(t, test, os.Args[0], []string{"-test.run=^" + test + "$", "-test.v", "-test.timeout=0"}, 0, env...)
}

// Kill sends SIGKILL, which no handler can catch, to the process group and waits
// until it is gone. Killing twice does nothing.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if p.Exited() {
		return
	}
	if err := p.Process.Kill(); err != nil {
		t.Errorf("harness: %v", err)
	}
}

// Stop sends sig to the process group, waits up to grace for the process to exit and
// kills it then. It returns the process's exit error (nil for a clean exit), or why
// it had to be killed.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	if err := p.StopWith(sig, grace); err != nil {
		return err
	}
	return p.Err()
}

// Failed returns why the process ended early, or nil while it runs.
func (p *Process) Failed() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited: %w (log %s)", p.Name, p.Ended(), p.Log)
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return localenv.LogTail(p.Log, n) }

// StartProxy proxies to the server of cfg on a free local port and returns a copy of
// cfg pointing at the proxy; a test can Cut and Restore it. t.Cleanup closes it.
func StartProxy(t testing.TB, cfg *rest.Config) (*localenv.Proxy, *rest.Config) {
	t.Helper()
	p, out, err := NewEnv(t, "proxy").StartProxy(cfg)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return p, out
}
