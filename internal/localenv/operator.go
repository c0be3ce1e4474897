package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
)

// OperatorBinary is the file name of the openmcp-operator in the assets folder.
const OperatorBinary = "openmcp-operator"

// Defaults for [OperatorOptions].
const (
	DefaultOperatorNamespace   = "openmcp-system"
	DefaultOperatorEnvironment = "local"
)

// OperatorOptions configure the real openmcp-operator.
type OperatorOptions struct {
	// Namespace is its POD_NAMESPACE on the platform cluster, created if missing.
	Namespace string
	// Environment is its --environment.
	Environment string
	// PurposeMappings become the scheduler's purposeMappings: which Cluster a
	// ClusterRequest of each purpose gets.
	PurposeMappings []PurposeMapping
	// Controllers are its --controllers. Default: DefaultOperatorControllers. The
	// deployment controller (ControllerDeployment) renders Jobs and Deployments that
	// only run with a kubelet: see StartKubelet.
	Controllers []string
}

// The openmcp-operator's controllers (its --controllers values).
const (
	ControllerScheduler     = "scheduler"
	ControllerAccessRequest = "accessrequest"
	ControllerDeployment    = "deploymentcontroller"
)

// DefaultOperatorControllers are what StartOperator runs unless told otherwise: the
// parts of openMCP that need no cluster to run anything.
var DefaultOperatorControllers = []string{ControllerScheduler, ControllerAccessRequest}

// PurposeMapping tells the scheduler how to serve one purpose.
type PurposeMapping struct {
	Purpose string
	// Profile is the ClusterProfile written into the Cluster's spec.profile, which
	// decides the cluster provider that grants access to it.
	Profile string
	// Tenancy Shared: one Cluster named like the purpose, in Namespace, for every
	// request. Exclusive: one Cluster per request, in the request's namespace.
	Tenancy clustersv1alpha1.Tenancy
	// Namespace of a shared Cluster.
	Namespace string
}

// Operator is a running openmcp-operator.
type Operator struct {
	*Process
	// Namespace is its POD_NAMESPACE.
	Namespace string
	// ConfigFile is the configuration it was started with.
	ConfigFile string
	// MetricsURL serves its controller-runtime metrics over plain HTTP (see
	// ReconcileErrors).
	MetricsURL string
}

// StartOperator runs the openmcp-operator built by hack/test-binaries.sh against the
// platform API server, by default with only its scheduler and access-request
// controllers (the deployment controller needs a kubelet to finish its Jobs and
// Deployments: StartKubelet), and returns once it reports ready. Leader election stays off: v1.3.0 uses a Lease name
// the API server rejects, and waits for the lease forever.
func (e *Env) StartOperator(ctx context.Context, platform *APIServer, opts OperatorOptions) (*Operator, error) {
	bin := filepath.Join(e.Assets, OperatorBinary)
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%s lacks %s: run hack/test-binaries.sh and use the folder it prints", e.Assets, OperatorBinary)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultOperatorNamespace
	}
	if opts.Environment == "" {
		opts.Environment = DefaultOperatorEnvironment
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = DefaultOperatorControllers
	}
	const name = "openmcp-operator"
	cfg, err := operatorConfig(opts.PurposeMappings)
	if err != nil {
		return nil, err
	}
	cfgFile, err := e.WriteFile(filepath.Join(name, "config.yaml"), cfg)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.WriteFile(e.KubeconfigPath(name), platform.Kubeconfig())
	if err != nil {
		return nil, err
	}
	c, err := client.New(platform.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("client for the platform cluster: %w", err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", opts.Namespace, err)
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	health, metrics := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	p, err := e.StartProcess(name, bin, []string{
		"run",
		"--environment=" + opts.Environment,
		"--kubeconfig=" + kubeconfig,
		"--config=" + cfgFile,
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--health-probe-bind-address=" + health,
		// Plain HTTP on loopback: the tests read how often its controllers failed.
		"--metrics-bind-address=" + metrics,
		"--metrics-secure=false",
	}, []string{"POD_NAMESPACE=" + opts.Namespace}, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := waitHTTPOK(ctx, p, "http://"+health+"/readyz", time.Minute); err != nil {
		return nil, err
	}
	return &Operator{Process: p, Namespace: opts.Namespace, ConfigFile: cfgFile, MetricsURL: "http://" + metrics + "/metrics"}, nil
}

// getOK is nil when url answers 200.
func getOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, body)
	}
	return nil
}

// operatorConfig renders the operator's configuration file: the scheduler's purpose
// mappings (it refuses to start without them) and nothing else, so every other
// setting is the operator's default.
func operatorConfig(mappings []PurposeMapping) ([]byte, error) {
	if len(mappings) == 0 {
		return nil, errors.New("openmcp-operator: no purpose mappings")
	}
	pm := map[string]any{}
	for _, m := range mappings {
		tmpl := map[string]any{"spec": map[string]any{"profile": m.Profile, "tenancy": string(m.Tenancy)}}
		def := map[string]any{"template": tmpl}
		if m.Tenancy == clustersv1alpha1.TENANCY_SHARED {
			// No name: the scheduler names the shared Cluster after the purpose.
			tmpl["metadata"] = map[string]any{"namespace": m.Namespace}
			def["tenancyCount"] = 0
		}
		pm[m.Purpose] = def
	}
	out, err := yaml.Marshal(map[string]any{"scheduler": map[string]any{"purposeMappings": pm}})
	if err != nil {
		return nil, fmt.Errorf("rendering the openmcp-operator's configuration: %w", err)
	}
	return out, nil
}
