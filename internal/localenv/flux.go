package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Flux's controllers in the assets folder, and the folder of its CRDs there.
const (
	SourceControllerBinary = "source-controller"
	HelmControllerBinary   = "helm-controller"
	FluxCRDsDir            = "flux-crds"
)

// DefaultFluxNamespace is FluxOptions.Namespace unless told otherwise.
const DefaultFluxNamespace = "flux-system"

// FluxOptions configure Flux on the platform cluster.
type FluxOptions struct {
	// Namespace is the controllers' RUNTIME_NAMESPACE on the platform cluster (where
	// they would hold leases and record their own events), created if missing.
	// Default: DefaultFluxNamespace.
	Namespace string
	// LogLevel is the controllers' --log-level (debug, info, error). Default info.
	LogLevel string
	// CABundle holds PEM certificates the controllers trust besides the system's, as
	// a platform adds its own CA to their image: the local registry's CA
	// (Registry.CA), so that sources pull from it over TLS without spec.insecure or
	// spec.certSecretRef.
	CABundle []byte
	// PlainHTTPRegistry has StartPlatform run the registry without TLS
	// (RegistryOptions.PlainHTTP).
	PlainHTTPRegistry bool
}

// Flux is Flux's source-controller and helm-controller running against one cluster,
// watching every namespace.
type Flux struct {
	// Namespace is their RUNTIME_NAMESPACE.
	Namespace string
	// SourceController fetches OCIRepositories (and Flux's other sources) and serves
	// their artifacts from StorageURL; HelmController installs HelmReleases from
	// them.
	SourceController, HelmController *Process
	// StorageURL is where the source-controller serves artifacts, as it advertises
	// them in their status.
	StorageURL string
}

// StartFlux installs Flux's CRDs (those of source-controller and helm-controller) on
// the API server, waits until they are established, and runs both controllers built
// by hack/test-binaries.sh against it, without leader election; it returns once both
// report ready. The source-controller keeps its artifacts under <dir>/flux/storage.
// A HelmRelease deploys where its spec.kubeConfig points, for example the
// kubeconfig of another local API server in a Secret: the controllers run on this
// machine and reach 127.0.0.1.
func (e *Env) StartFlux(ctx context.Context, cluster *APIServer, opts FluxOptions) (*Flux, error) {
	source, err := e.assetBinary(SourceControllerBinary)
	if err != nil {
		return nil, err
	}
	helm, err := e.assetBinary(HelmControllerBinary)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultFluxNamespace
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for the %s cluster: %w", cluster.Name, err)
	}
	if err := installFluxCRDs(ctx, c, filepath.Join(e.Assets, FluxCRDsDir)); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", opts.Namespace, err)
	}
	kubeconfig, err := e.WriteFile(e.KubeconfigPath("flux"), cluster.Kubeconfig())
	if err != nil {
		return nil, err
	}
	storage := filepath.Join(e.Dir, "flux", "storage")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", storage, err)
	}
	ports, err := FreePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	env := []string{"KUBECONFIG=" + kubeconfig, "RUNTIME_NAMESPACE=" + opts.Namespace}
	if len(opts.CABundle) > 0 {
		bundle, err := e.caBundle(opts.CABundle)
		if err != nil {
			return nil, err
		}
		// Go's TLS reads its roots from SSL_CERT_FILE where set.
		env = append(env, "SSL_CERT_FILE="+bundle)
	}
	common := []string{
		"--enable-leader-election=false",
		"--watch-all-namespaces=true",
		"--log-encoding=console",
		"--log-level=" + opts.LogLevel,
	}
	f := &Flux{Namespace: opts.Namespace, StorageURL: "http://" + addr(2)}
	// Started together, waited for together: each takes a few seconds to sync.
	if f.SourceController, err = e.StartProcess(SourceControllerBinary, source, append(slices.Clone(common),
		"--metrics-addr="+addr(0),
		"--health-addr="+addr(1),
		"--storage-path="+storage,
		"--storage-addr="+addr(2),
		"--storage-adv-addr="+addr(2),
	), env, 10*time.Second); err != nil {
		return nil, err
	}
	if f.HelmController, err = e.StartProcess(HelmControllerBinary, helm, append(slices.Clone(common),
		"--metrics-addr="+addr(3),
		"--health-addr="+addr(4),
	), env, 10*time.Second); err != nil {
		return nil, err
	}
	if err := waitHTTPOK(ctx, f.SourceController, "http://"+addr(1)+"/readyz", time.Minute); err != nil {
		return nil, err
	}
	if err := waitHTTPOK(ctx, f.HelmController, "http://"+addr(4)+"/readyz", time.Minute); err != nil {
		return nil, err
	}
	return f, nil
}

// installFluxCRDs creates the CRDs of every YAML file in dir (existing ones are left
// alone) and waits until the API server has established them.
func installFluxCRDs(ctx context.Context, c client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no Flux CRDs in %s: run hack/test-binaries.sh and use the folder it prints", dir)
	}
	var names []string
	for _, file := range files {
		objs, err := ReadObjects(file)
		if err != nil {
			return err
		}
		for _, u := range objs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				return fmt.Errorf("%s: %s %s is no CRD", file, u.GetKind(), u.GetName())
			}
			if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	return Poll(ctx, time.Minute, "Flux CRDs established", func(ctx context.Context) error {
		for _, name := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			if !crdEstablished(crd) {
				return fmt.Errorf("CRD %s is not established yet", name)
			}
		}
		return nil
	})
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// systemRoots are where Debian, Fedora and Alpine keep the system's CA bundle.
var systemRoots = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// caBundle writes the system's CA bundle followed by extra into flux/ca-bundle.crt:
// SSL_CERT_FILE replaces the system's roots, it does not add to them.
func (e *Env) caBundle(extra []byte) (string, error) {
	var bundle []byte
	for _, f := range systemRoots {
		if data, err := os.ReadFile(f); err == nil {
			bundle = data
			break
		}
	}
	bundle = append(append(bundle, '\n'), extra...)
	return e.WriteFile(filepath.Join("flux", "ca-bundle.crt"), bundle)
}
