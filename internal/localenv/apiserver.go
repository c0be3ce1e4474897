package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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

// APIServer is a running Kubernetes API server (etcd and kube-apiserver). It
// authorizes with RBAC and serves TokenRequest and SelfSubjectReview.
type APIServer struct {
	// Name of the cluster it stands in for, e.g. "platform".
	Name string
	// Config is admin (system:masters) access.
	Config *rest.Config

	env      *envtest.Environment
	thread   *pinnedThread
	stopOnce sync.Once
	stopErr  error
	// kubeconfigFile is Kubeconfig's file, for the cluster's own programs.
	kubeconfigFile string

	mu        sync.Mutex
	scheduler bool // kube-scheduler runs (StartScheduler)
}

// Kubeconfig returns a kubeconfig with the server's CA and admin client certificate
// embedded, for handing to another process.
func (s *APIServer) Kubeconfig() []byte { return slices.Clone(s.env.KubeConfig) }

// Stop stops kube-apiserver and etcd. Stopping twice does nothing.
func (s *APIServer) Stop() error {
	s.stopOnce.Do(func() {
		s.thread.do(func() { s.stopErr = s.env.Stop() })
		s.thread.close()
	})
	if s.stopErr != nil {
		return fmt.Errorf("stopping the %s API server: %w", s.Name, s.stopErr)
	}
	return nil
}

// StartAPIServer starts etcd and kube-apiserver for the cluster called name with the
// real kube-controller-manager beside them (startControllerManager), installs crds and
// returns once they are served. Its files go into <dir>/<name>, its output into
// logs/<name>.log. Pods need a node besides: StartSimulatedNodes, or StartKubelet on the
// platform cluster.
func (e *Env) StartAPIServer(name string, crds []*apiextensionsv1.CustomResourceDefinition) (*APIServer, error) {
	etcd, apiServer, err := e.envtestBinaries()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.Dir, name)
	for _, d := range []string{filepath.Join(dir, "etcd"), filepath.Join(dir, "certs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	logFile, err := e.openLog(name)
	if err != nil {
		return nil, err
	}
	// A thread of its own: envtest's start holds it until the server is ready, and kcp
	// or another server may start meanwhile.
	s := &APIServer{Name: name, thread: newPinnedThread(), env: &envtest.Environment{
		// Explicit paths: KUBEBUILDER_ASSETS or TEST_ASSET_* in the user's environment
		// would otherwise take precedence.
		BinaryAssetsDirectory: e.Assets,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{Path: etcd, DataDir: filepath.Join(dir, "etcd"), Out: logFile, Err: logFile},
			APIServer: &envtest.APIServer{
				Path: apiServer, CertDir: filepath.Join(dir, "certs"), Out: logFile, Err: logFile,
			},
			KubectlPath: filepath.Join(e.Assets, "kubectl"),
		},
		// Never a developer's current cluster (USE_EXISTING_CLUSTER).
		UseExistingCluster:       ptr.To(false),
		CRDs:                     slices.Clone(crds),
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}}
	// envtest forks on the calling goroutine: use the pinned thread, so the wrapper's
	// parent-death signal is tied to a thread that lives as long as the server.
	s.thread.do(func() { s.Config, err = s.env.Start() })
	if err != nil {
		s.thread.close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the %s API server: %w\n%s", name, err, LogTail(logFile.Name(), 20))
	}
	e.onStop(name+" API server", func() error {
		defer logFile.Close()
		return s.Stop()
	})
	// Callers create objects in bursts; client-go's default of 5 QPS would make them
	// wait on the client instead of the server.
	s.Config.QPS, s.Config.Burst = 100, 200
	if s.kubeconfigFile, err = e.WriteFile(filepath.Join(name, "admin.kubeconfig"), s.Kubeconfig()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.startControllerManager(ctx, s); err != nil {
		return nil, fmt.Errorf("the %s cluster's kube-controller-manager: %w", name, err)
	}
	return s, nil
}

// OpenMCPCRDs returns openmcp-operator's CRDs (api/crds) labelled with the purpose:
// what a cluster of that purpose has installed.
func OpenMCPCRDs(purpose string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
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

// WriteFile writes data into the Env's folder (relative paths are taken from it).
func (e *Env) WriteFile(path string, data []byte) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.Dir, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("creating the folder of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
