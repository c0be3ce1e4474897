package command

import (
	"bytes"
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

	"github.com/go-logr/logr"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/localplatform"
)

// localRun is one start of the local platform.
type localRun struct {
	opts                       *localOptions
	out                        io.Writer
	repo, state, assets        string
	env                        *localenv.Env
	log                        logr.Logger
	p                          *progress
	kcp                        *localenv.KCP
	platform, onboarding, wl   *localenv.APIServer
	mcp                        *localenv.APIServer
	platformClient             client.Client
	runProc                    *localenv.Process
	platformErr                chan error
	kcpKubeconfig, onboardingK string
	workloadK                  string
}

func (l *localRun) start(ctx context.Context) error {
	// kcp takes about 30 s; the API servers start meanwhile.
	done := l.p.step("kcp and kube-apiservers for the platform, onboarding, workload and MCP clusters")
	type kcpResult struct {
		k   *localenv.KCP
		err error
	}
	kcpc := make(chan kcpResult, 1)
	go func() {
		k, err := l.env.StartKCP(ctx, localenv.KCPOptions{FeatureGates: []string{"GlobalServiceAccount=true"}})
		kcpc <- kcpResult{k, err}
	}()
	platformCRDs, err := localplatform.CRDs()
	if err != nil {
		return err
	}
	for _, s := range []struct {
		into **localenv.APIServer
		name string
	}{{&l.platform, "platform"}, {&l.onboarding, "onboarding"}, {&l.wl, "workload"}, {&l.mcp, "mcp"}} {
		var crds = platformCRDs
		if s.name != "platform" {
			crds = nil
		}
		if *s.into, err = l.env.StartAPIServer(s.name, crds); err != nil {
			return err
		}
		fmt.Fprintf(l.out, "      %s cluster at %s\n", s.name, (*s.into).Config.Host)
	}
	r := <-kcpc
	if r.err != nil {
		return r.err
	}
	l.kcp = r.k
	done("kcp at " + l.kcp.URL)

	if err := l.writeKubeconfigs(); err != nil {
		return err
	}
	if err := l.startPlatform(ctx); err != nil {
		return err
	}
	if err := l.platformTeam(ctx); err != nil {
		return err
	}
	if err := l.runInit(ctx); err != nil {
		return err
	}
	providerConfigFile := l.opts.provider.Local.ProviderConfig
	done = l.p.step("ProviderConfig with spec.kcp (" + providerConfigFile + ")")
	if err := applyFile(ctx, l.platformClient, filepath.Join(l.repo, providerConfigFile), nil); err != nil {
		return err
	}
	done("")
	return l.runRun(ctx)
}

// writeKubeconfigs writes the clusters' admin kubeconfigs into the state folder and
// links kubectl next to them.
func (l *localRun) writeKubeconfigs() error {
	for _, s := range []*localenv.APIServer{l.platform, l.onboarding, l.wl, l.mcp} {
		if _, err := l.env.WriteFile(l.env.KubeconfigPath(s.Name), s.Kubeconfig); err != nil {
			return err
		}
	}
	kc, err := l.kcp.Kubeconfig(map[string]string{
		"root": "root", "tenant": localTenantWorkspace, "provider": l.opts.providerWorkspace(),
	}, "tenant")
	if err != nil {
		return err
	}
	if l.kcpKubeconfig, err = l.env.WriteFile(l.env.KubeconfigPath("kcp"), kc); err != nil {
		return err
	}
	l.onboardingK, l.workloadK = l.env.KubeconfigPath("onboarding"), l.env.KubeconfigPath("workload")
	bin := filepath.Join(l.state, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return err
	}
	return os.Symlink(filepath.Join(l.assets, "kubectl"), filepath.Join(bin, "kubectl"))
}

// startPlatform runs the stand-in for openMCP's cluster provider and registers the
// ControlPlane standard mode serves.
func (l *localRun) startPlatform(ctx context.Context) error {
	done := l.p.step("local platform granting ClusterRequests and AccessRequests")
	lp, err := localplatform.New(l.platform.Config, localplatform.Options{
		Logger: l.log.WithName("localplatform"),
		// Local runs last a working day; renewals are tested elsewhere.
		TokenTTL: 12 * time.Hour,
	})
	if err != nil {
		return err
	}
	for _, t := range []localplatform.TargetCluster{
		{Name: "workload", Purposes: []string{clustersv1alpha1.PURPOSE_WORKLOAD}, Config: l.wl.Config},
		{Name: "onboarding", Purposes: []string{clustersv1alpha1.PURPOSE_ONBOARDING}, Config: l.onboarding.Config},
		{Name: "mcp", Purposes: []string{clustersv1alpha1.PURPOSE_MCP}, Config: l.mcp.Config},
	} {
		if err := lp.AddCluster(t); err != nil {
			return err
		}
	}
	l.platformErr = make(chan error, 1)
	go func() {
		if err := lp.Start(ctx); err != nil && ctx.Err() == nil {
			l.platformErr <- err
		}
	}()
	if err := lp.RegisterControlPlane(ctx, localControlPlaneName, localControlPlaneNamespace, "mcp"); err != nil {
		return err
	}
	done("ControlPlane " + localControlPlaneNamespace + "/" + localControlPlaneName + " registered on the MCP cluster")
	return nil
}

// platformTeam does what a platform team does before the provider runs: the
// ServiceProvider and its namespace on the platform cluster, the kcp provider
// workspace with the runtime's identity, and that identity's kubeconfig in the Secret
// spec.kcp names.
func (l *localRun) platformTeam(ctx context.Context) error {
	localNamespace, localProviderWorkspace := l.opts.namespace(), l.opts.providerWorkspace()
	done := l.p.step("platform team: ServiceProvider, namespace " + localNamespace + ", kcp workspace " + localProviderWorkspace + " with the runtime's identity")
	scheme, err := platformScheme()
	if err != nil {
		return err
	}
	if l.platformClient, err = client.New(l.platform.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := l.platformClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", localNamespace, err)
	}
	if err := applyFile(ctx, l.platformClient, filepath.Join(l.repo, serviceProviderFile), nil); err != nil {
		return err
	}

	kcpScheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, tenancyv1alpha1.AddToScheme, apisv1alpha2.AddToScheme} {
		if err := add(kcpScheme); err != nil {
			return err
		}
	}
	parent := "root"
	for _, name := range strings.Split(strings.TrimPrefix(localProviderWorkspace, "root:"), ":") {
		if err := createWorkspace(ctx, l.kcp, kcpScheme, parent, name); err != nil {
			return err
		}
		parent += ":" + name
	}
	provider, err := client.New(l.kcp.ConfigFor(localProviderWorkspace), client.Options{Scheme: kcpScheme})
	if err != nil {
		return err
	}
	if err := applyFile(ctx, provider, filepath.Join(l.repo, l.opts.provider.Local.RuntimeRBAC), nil); err != nil {
		return err
	}
	kubeconfig, err := runtimeKubeconfig(ctx, l.kcp, localProviderWorkspace)
	if err != nil {
		return err
	}
	if err := l.platformClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: localNamespace, Name: localKCPSecret},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}); err != nil {
		return fmt.Errorf("creating Secret %s/%s: %w", localNamespace, localKCPSecret, err)
	}
	done("")
	return nil
}

// createWorkspace creates workspace name in parent and waits until it is Ready.
func createWorkspace(ctx context.Context, k *localenv.KCP, scheme *runtime.Scheme, parent, name string) error {
	c, err := client.New(k.ConfigFor(parent), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ws := &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	// Right after kcp reports ready, its admission may not know the root workspace
	// type yet ("parent type cannot be resolved"): refusals are retried for a while.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return last == nil || apierrors.IsAlreadyExists(last), nil
	}); err != nil {
		return fmt.Errorf("creating workspace %s:%s: %w", parent, name, last)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ws); err != nil {
			return false, nil // kcp may be busy
		}
		return ws.Status.Phase == kcpcorev1alpha1.LogicalClusterPhaseReady, nil
	})
}

// runtimeKubeconfig mints a token of the runtime's ServiceAccount in the provider
// workspace (created by the RBAC manifest) and writes a kubeconfig for it: what a
// platform team puts into the Secret spec.kcp.kubeconfigSecret names.
func runtimeKubeconfig(ctx context.Context, k *localenv.KCP, providerWorkspace string) ([]byte, error) {
	cfg := k.ConfigFor(providerWorkspace)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var tr *authenticationv1.TokenRequest
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		tr, err = cs.CoreV1().ServiceAccounts("kcp-serviceprovider").CreateToken(ctx, "runtime", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(runtimeTokenTTL.Seconds()))},
		}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("minting the runtime's kcp token: %w", err)
	}
	return kubeconfig.Render("runtime", kubeconfig.Server{URL: cfg.Host, CAData: cfg.CAData}, tr.Status.Token)
}

// selfArgs are the flags the openmcp-operator would pass, pointed at the local clusters.
func (l *localRun) selfArgs(command string) []string {
	return []string{command,
		"--environment=local",
		"--provider-name=" + l.opts.provider.Name,
		"--verbosity=" + l.opts.verbosity,
		"--platform-kubeconfig=" + l.env.KubeconfigPath("platform"),
	}
}

// selfEnv is the environment the openmcp-operator would set.
func (l *localRun) selfEnv() []string {
	return []string{"POD_NAMESPACE=" + l.opts.namespace(), "POD_NAME=local", envProviderName + "=" + l.opts.provider.Name}
}

func (l *localRun) runInit(ctx context.Context) error {
	done := l.p.step("init: CRDs on the onboarding and platform clusters, " + l.opts.d.serviceGVK.Kind + " registered at the ServiceProvider")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	proc, err := l.env.StartProcess("init", self, l.selfArgs("init"), l.selfEnv(), 10*time.Second)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-proc.Done():
	}
	if err := proc.Err(); err != nil {
		return fmt.Errorf("init failed: %w\n%s", err, localenv.LogTail(proc.Log, 20))
	}
	done("")
	return nil
}

func (l *localRun) runRun(ctx context.Context) error {
	done := l.p.step("run: the provider in standard mode and kcp mode")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ports, err := localenv.FreePorts(2)
	if err != nil {
		return err
	}
	probe := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := append(l.selfArgs("run"),
		"--health-probe-bind-address="+probe,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--retry-interval=2s",
	)
	if l.runProc, err = l.env.StartProcess("run", self, args, l.selfEnv(), 30*time.Second); err != nil {
		return err
	}
	failed := func() error {
		if isDone(l.runProc.Done()) {
			return fmt.Errorf("run exited: %v\n%s", l.runProc.Err(), localenv.LogTail(l.runProc.Log, 20))
		}
		return nil
	}
	// Ready: the standard-mode manager answers its readiness probe...
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := failed(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+probe+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("run did not become ready: %w", err)
	}
	// ...and kcp mode has provisioned the APIExport tenants bind.
	scheme := runtime.NewScheme()
	if err := apisv1alpha2.AddToScheme(scheme); err != nil {
		return err
	}
	localProviderWorkspace, exportName := l.opts.providerWorkspace(), l.opts.d.exportName
	provider, err := client.New(l.kcp.ConfigFor(localProviderWorkspace), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := failed(); err != nil {
			return false, err
		}
		export := &apisv1alpha2.APIExport{}
		if err := provider.Get(ctx, client.ObjectKey{Name: exportName}, export); err != nil {
			return false, nil
		}
		return export.Status.IdentityHash != "", nil
	})
	if err != nil {
		return fmt.Errorf("kcp mode did not provision APIExport %s: %w\n%s", exportName, err, localenv.LogTail(l.runProc.Log, 20))
	}
	done("APIExport " + exportName + " provisioned in " + localProviderWorkspace)
	return nil
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// applyFile creates every object of a multi-document YAML file (objects that exist
// are left alone), after mutate if given.
func applyFile(ctx context.Context, c client.Client, path string, mutate func(*unstructured.Unstructured)) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if mutate != nil {
			mutate(u)
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}
