package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/openmcp-project/openmcp-operator/api/crds"
)

// The openMCP cluster purposes an APIServer can stand in for. A CRD's label
// openmcp.cloud/cluster names the purpose of the clusters it is installed on.
const (
	// PurposePlatform is the cluster providers run on: ClusterRequests,
	// AccessRequests, Clusters, ServiceProviders, ProviderConfigs.
	PurposePlatform = "platform"
	// PurposeOnboarding is where tenants create ControlPlanes and, in standard mode,
	// Service API objects.
	PurposeOnboarding = "onboarding"
	// PurposeWorkload is a shared cluster where service workers run.
	PurposeWorkload = "workload"
	// PurposeMCP is one tenant's ControlPlane cluster.
	PurposeMCP = "mcp"
)

// purposeLabel is the CRD label that names the cluster purpose a CRD belongs to.
const purposeLabel = "openmcp.cloud/cluster"

// APIServer is a Kubernetes API server (etcd and kube-apiserver, started through
// controller-runtime's envtest) standing in for one openMCP cluster.
type APIServer struct {
	// Purpose is the openMCP purpose the server stands in for.
	Purpose string
	// Config is admin (system:masters) access.
	Config *rest.Config
	// Client is an admin client using the harness Scheme.
	Client client.Client

	env      *envtest.Environment
	thread   *pinnedThread
	stopOnce sync.Once
	stopErr  error
}

// APIServerOption configures StartAPIServer.
type APIServerOption func(*apiServerConfig)

type apiServerConfig struct {
	crds []*apiextensionsv1.CustomResourceDefinition
}

// WithCRDs installs CRDs in addition to the openMCP ones of the purpose, for example
// a service provider's Service API. StartAPIServer returns once they are served.
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) APIServerOption {
	return func(c *apiServerConfig) { c.crds = append(c.crds, crds...) }
}

// StartAPIServer starts a Kubernetes API server for an openMCP cluster purpose
// (PurposePlatform, PurposeOnboarding, PurposeWorkload or PurposeMCP; start several
// for several MCPs). It installs the openMCP CRDs labelled with that purpose (from
// openmcp-operator's api/crds) and the CRDs of WithCRDs. t.Cleanup stops it and
// removes its files; if the test failed, the tail of its logs is printed first.
//
// The server authorizes with RBAC and serves TokenRequest and SelfSubjectReview.
func StartAPIServer(t testing.TB, purpose string, opts ...APIServerOption) *APIServer {
	t.Helper()
	if !slices.Contains([]string{PurposePlatform, PurposeOnboarding, PurposeWorkload, PurposeMCP}, purpose) {
		t.Fatalf("StartAPIServer: unknown cluster purpose %q", purpose)
	}
	var cfg apiServerConfig
	for _, o := range opts {
		o(&cfg)
	}
	assets := assetsDir(t)
	etcdPath, apiServerPath, err := envtestBinaries(assets)
	if err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	openMCP, err := openMCPCRDs(purpose)
	if err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}

	dir := scratchDir(t, "apiserver-"+purpose)
	etcdLog := createLog(t, filepath.Join(dir, "etcd.log"))
	apiServerLog := createLog(t, filepath.Join(dir, "kube-apiserver.log"))
	s := &APIServer{
		Purpose: purpose,
		thread:  newPinnedThread(),
		env: &envtest.Environment{
			// Explicit paths: KUBEBUILDER_ASSETS or TEST_ASSET_* in the developer's
			// environment would otherwise take precedence over BinaryAssetsDirectory.
			BinaryAssetsDirectory: assets,
			ControlPlane: envtest.ControlPlane{
				Etcd: &envtest.Etcd{
					Path:    etcdPath,
					DataDir: filepath.Join(dir, "etcd"),
					Out:     etcdLog,
					Err:     etcdLog,
				},
				APIServer: &envtest.APIServer{
					Path:    apiServerPath,
					CertDir: filepath.Join(dir, "certs"),
					Out:     apiServerLog,
					Err:     apiServerLog,
				},
				KubectlPath: filepath.Join(assets, "kubectl"),
			},
			// Never a developer's current cluster (USE_EXISTING_CLUSTER).
			UseExistingCluster:       ptr.To(false),
			CRDs:                     append(openMCP, cfg.crds...),
			Scheme:                   Scheme(),
			ControlPlaneStartTimeout: time.Minute,
			ControlPlaneStopTimeout:  30 * time.Second,
		},
	}
	for _, d := range []string{s.env.ControlPlane.Etcd.DataDir, s.env.ControlPlane.APIServer.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("StartAPIServer: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, purpose+" etcd", etcdLog.Name())
			logTail(t, purpose+" kube-apiserver", apiServerLog.Name())
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stopping %s API server: %v", purpose, err)
		}
		s.thread.close()
		_ = etcdLog.Close()
		_ = apiServerLog.Close()
		_ = os.RemoveAll(dir)
	})

	start := time.Now()
	// envtest forks etcd and kube-apiserver on the calling goroutine: run it on the
	// pinned thread so their parent-death signal is tied to a thread that lives as
	// long as they do.
	s.thread.do(func() { s.Config, err = s.env.Start() })
	if err != nil {
		logTail(t, purpose+" etcd", etcdLog.Name())
		logTail(t, purpose+" kube-apiserver", apiServerLog.Name())
		t.Fatalf("starting %s API server: %v", purpose, err)
	}
	// As for kcp: the tests' own clients must not wait on client-go's default 5 QPS.
	s.Config.QPS, s.Config.Burst = 100, 200
	s.Client, err = client.New(s.Config, client.Options{Scheme: s.env.Scheme})
	if err != nil {
		t.Fatalf("client for %s API server: %v", purpose, err)
	}
	t.Logf("%s API server ready at %s after %s", purpose, s.Config.Host, time.Since(start).Round(100*time.Millisecond))
	return s
}

// Kubeconfig returns a kubeconfig with the server's CA and admin client certificate
// embedded, for handing to another process or a component that reads kubeconfigs.
func (s *APIServer) Kubeconfig() []byte {
	return slices.Clone(s.env.KubeConfig)
}

// Stop stops kube-apiserver and etcd. Stopping twice does nothing.
func (s *APIServer) Stop() error {
	s.stopOnce.Do(func() {
		s.thread.do(func() { s.stopErr = s.env.Stop() })
	})
	if s.stopErr != nil {
		return fmt.Errorf("stopping %s API server: %w", s.Purpose, s.stopErr)
	}
	return nil
}

// openMCPCRDs returns openmcp-operator's CRDs labelled with the purpose.
func openMCPCRDs(purpose string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.CRDs()
	if err != nil {
		return nil, fmt.Errorf("reading openMCP CRDs: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Labels[purposeLabel] == purpose {
			out = append(out, crd)
		}
	}
	return out, nil
}

// createLog creates a server's log file.
func createLog(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("creating log %s: %v", path, err)
	}
	return f
}
