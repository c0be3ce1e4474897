package localenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServer is a running Kubernetes API server (etcd and kube-apiserver).
type APIServer struct {
	// Name of the cluster it stands in for, e.g. "platform".
	Name string
	// Config is admin (system:masters) access.
	Config *rest.Config
	// Kubeconfig is the same access as a self-contained kubeconfig.
	Kubeconfig []byte
}

// StartAPIServer starts etcd and kube-apiserver for the cluster called name, installs
// crds and returns once they are served. Its files go into <state>/<name>.
func (e *Env) StartAPIServer(name string, crds []*apiextensionsv1.CustomResourceDefinition) (*APIServer, error) {
	etcd, apiServer, err := e.wrappers()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.Dir, name)
	for _, d := range []string{filepath.Join(dir, "etcd"), filepath.Join(dir, "certs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	logFile, err := os.OpenFile(e.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	env := &envtest.Environment{
		// Explicit paths: KUBEBUILDER_ASSETS in the user's environment would otherwise
		// take precedence.
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
	}
	var cfg *rest.Config
	// envtest forks on the calling goroutine: use the pinned thread, so the wrapper's
	// parent-death signal is tied to a thread that lives as long as the Env.
	e.thread.do(func() { cfg, err = env.Start() })
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the %s API server: %w\n%s", name, err, LogTail(e.LogPath(name), 20))
	}
	e.onStop(name+" API server", func() error {
		var err error
		e.thread.do(func() { err = env.Stop() })
		_ = logFile.Close()
		return err
	})
	cfg.QPS, cfg.Burst = 50, 100
	return &APIServer{Name: name, Config: cfg, Kubeconfig: slices.Clone(env.KubeConfig)}, nil
}

// wrappers returns the paths envtest should start for etcd and kube-apiserver: small
// scripts that exec setpriv(1), which sets the parent-death signal and then execs the
// real binary, keeping the process id (so envtest's own stop still works).
func (e *Env) wrappers() (etcd, apiServer string, err error) {
	dir := filepath.Join(e.Dir, "wrappers")
	etcd, apiServer = filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")
	if _, err := os.Stat(apiServer); err == nil {
		return etcd, apiServer, nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", "", errNoSetpriv
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("creating wrapper folder: %w", err)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := "#!/bin/sh\n" +
			"# Written by kcp-serviceprovider local: the server dies with the command.\n" +
			"exec " + shellQuote(setpriv) + " --pdeathsig KILL -- " +
			shellQuote(filepath.Join(e.Assets, name)) + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700); err != nil {
			return "", "", fmt.Errorf("writing wrapper for %s: %w", name, err)
		}
	}
	return etcd, apiServer, nil
}

// WriteFile writes data into the state folder (relative paths are taken from it).
func (e *Env) WriteFile(path string, data []byte) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.Dir, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, data, 0o600)
}
