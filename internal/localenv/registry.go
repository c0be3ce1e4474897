package localenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// The OCI registry and the helm CLI in the assets folder.
const (
	RegistryBinary = "registry"
	HelmBinary     = "helm"
)

// Registry is a running OCI registry (CNCF distribution) on loopback, with its blobs
// under <dir>/registry/storage. It serves TLS with a certificate of a CA the Env
// makes (CA), as a registry of a real platform serves one of a CA its clients trust;
// with RegistryOptions.PlainHTTP it speaks plain HTTP instead.
type Registry struct {
	*Process
	// Host is its address, "127.0.0.1:<port>": what oci:// references name.
	Host string
	// ConfigFile is the configuration it was started with.
	ConfigFile string
	// CA is the PEM certificate of the CA that signed its serving certificate, and
	// CAFile the file holding it; both empty with PlainHTTP. Flux's source-controller
	// trusts it (FluxOptions.CABundle), so an OCIRepository needs neither spec.insecure
	// nor spec.certSecretRef.
	CA     []byte
	CAFile string

	env *Env
}

// RegistryOptions configure StartRegistry.
type RegistryOptions struct {
	// PlainHTTP serves plain HTTP instead of TLS: what an OCIRepository with
	// spec.insecure pulls from.
	PlainHTTP bool
}

// StartRegistry runs the OCI registry built by hack/test-binaries.sh and returns once
// it answers the distribution API (GET /v2/). Nothing authenticates: anyone on this
// machine may push and pull.
func (e *Env) StartRegistry(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	bin, err := e.assetBinary(RegistryBinary)
	if err != nil {
		return nil, err
	}
	name := "registry"
	if opts.PlainHTTP {
		name = "registry-http"
	}
	storage := filepath.Join(e.Dir, name, "storage")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", storage, err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(ports[0])
	r := &Registry{Host: host, env: e}
	listen := map[string]any{"addr": host}
	scheme := "http"
	if !opts.PlainHTTP {
		pki := filepath.Join(e.Dir, name, "pki")
		if err := os.MkdirAll(pki, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", pki, err)
		}
		ca, err := newAuthority(pki, "ca", "local-platform-registry-ca")
		if err != nil {
			return nil, err
		}
		serving, err := ca.serve(pki, "registry")
		if err != nil {
			return nil, err
		}
		r.CA, r.CAFile, scheme = ca.PEM(), ca.File, "https"
		listen["tls"] = map[string]any{"certificate": serving.CertFile, "key": serving.KeyFile}
	}
	cfg, err := yaml.Marshal(map[string]any{
		"version": "0.1",
		"log":     map[string]any{"level": "info", "formatter": "text"},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": storage},
			"delete":     map[string]any{"enabled": true},
		},
		"http": listen,
	})
	if err != nil {
		return nil, fmt.Errorf("rendering the registry's configuration: %w", err)
	}
	if r.ConfigFile, err = e.WriteFile(filepath.Join(name, "config.yml"), cfg); err != nil {
		return nil, err
	}
	// Without an exporter setting, distribution v3 sends traces to an OTLP collector
	// on localhost and logs every failure to reach it.
	if r.Process, err = e.StartProcess(name, bin, []string{"serve", r.ConfigFile}, []string{"OTEL_TRACES_EXPORTER=none"}, 10*time.Second); err != nil {
		return nil, err
	}
	if err := waitHTTPOK(ctx, r.Process, scheme+"://"+host+"/v2/", time.Minute); err != nil {
		return nil, err
	}
	return r, nil
}

// PushChart packages the Helm chart in chartDir (Chart.yaml and templates) at version
// with the real helm CLI and pushes it to oci://<Host>/<repo>. It returns the chart's
// OCI reference without tag, oci://<Host>/<repo>/<chart name>: an OCIRepository's
// spec.url, with the version as its spec.ref.tag. helm's output goes to logs/helm.log;
// its configuration, cache and data live under <dir>/helm, away from the user's.
func (r *Registry) PushChart(ctx context.Context, chartDir, repo, version string) (string, error) {
	e := r.env
	bin, err := e.assetBinary(HelmBinary)
	if err != nil {
		return "", err
	}
	// helm runs in the Env's folder.
	if chartDir, err = filepath.Abs(chartDir); err != nil {
		return "", err
	}
	chart, err := chartName(chartDir)
	if err != nil {
		return "", err
	}
	home := filepath.Join(e.Dir, "helm")
	out := filepath.Join(home, "packages")
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", out, err)
	}
	env := MergeEnv(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		// helm falls back to Docker's credentials for registries it has no login for.
		"DOCKER_CONFIG="+filepath.Join(home, "docker"),
	)
	run := func(args ...string) error {
		logFile, err := e.openLog("helm")
		if err != nil {
			return err
		}
		defer logFile.Close()
		var buf bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = e.Dir
		cmd.Env = env
		cmd.Stdout = &buf
		cmd.Stderr = &buf
		_, _ = fmt.Fprintf(logFile, "$ helm %s\n", strings.Join(args, " "))
		err = cmd.Run()
		_, _ = logFile.Write(buf.Bytes())
		if err != nil {
			return fmt.Errorf("helm %s: %w\n%s", args[0], err, strings.TrimSpace(buf.String()))
		}
		return nil
	}
	if err := run("package", chartDir, "--version", version, "--destination", out); err != nil {
		return "", err
	}
	pkg := filepath.Join(out, chart+"-"+version+".tgz")
	if _, err := os.Stat(pkg); err != nil {
		return "", fmt.Errorf("helm package wrote no %s: %w", filepath.Base(pkg), err)
	}
	base := "oci://" + r.Host + "/" + strings.Trim(repo, "/")
	tls := []string{"--plain-http"}
	if r.CAFile != "" {
		tls = []string{"--ca-file", r.CAFile}
	}
	if err := run(append([]string{"push", pkg, base}, tls...)...); err != nil {
		return "", err
	}
	return base + "/" + chart, nil
}

// chartName reads the name of the chart in dir.
func chartName(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading the chart: %w", err)
	}
	var meta struct {
		Name string `json:"name"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return "", fmt.Errorf("%s/Chart.yaml: %w", dir, err)
	}
	if meta.Name == "" {
		return "", fmt.Errorf("%s/Chart.yaml has no name", dir)
	}
	return meta.Name, nil
}

// assetBinary is the path of an executable in the assets folder.
func (e *Env) assetBinary(name string) (string, error) {
	bin := filepath.Join(e.Assets, name)
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s lacks %s: run hack/test-binaries.sh and use the folder it prints", e.Assets, name)
	}
	return bin, nil
}

// waitHTTPOK waits until url answers 200, and fails at once, with the tail of its
// log, when p ends meanwhile.
func waitHTTPOK(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s ended (%w):\n%s", p.Name, p.Ended(), LogTail(p.Log, 20))
		}
		last = getOK(ctx, probeClient, url)
		return last == nil, nil
	})
	if err != nil {
		if last != nil && !p.Exited() {
			err = fmt.Errorf("%w (last: %w)", err, last)
		}
		return fmt.Errorf("waiting for %s to answer: %w", p.Name, err)
	}
	return nil
}
