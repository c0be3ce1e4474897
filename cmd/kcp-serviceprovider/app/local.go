package app

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/localplatform"
)

// The local platform's fixed names. The sample manifests in config/ use the same.
const (
	// DefaultStateDir is --state-dir's default, relative to the working directory.
	DefaultStateDir = ".local-platform"
	// localNamespace is the provider's namespace on the platform cluster, named like
	// the openmcp-operator names it (sp-<ServiceProvider>).
	localNamespace = "sp-" + DefaultProviderName
	// localKCPSecret holds the kubeconfig of the runtime's kcp identity
	// (spec.kcp.kubeconfigSecret of the sample ProviderConfig).
	localKCPSecret = "kcp-kubeconfig"
	// localProviderWorkspace is spec.kcp.providerWorkspace of the sample ProviderConfig.
	localProviderWorkspace = "root:providers:" + DefaultProviderName
	// localTenantWorkspace is the workspace the sample tenant creates.
	localTenantWorkspace = "root:tenant"
	// localControlPlane is the ControlPlane (namespace/name) the platform registers for
	// standard mode; the sample Echo is named like it.
	localControlPlaneNamespace = "default"
	localControlPlaneName      = "demo"
	// stateMarker marks a folder as a state folder, which local may empty, and holds
	// the process id of the local command using it.
	stateMarker = ".kcp-serviceprovider-local"
	// stageEnv tells the re-executed command that the state folder is prepared.
	stageEnv = "KSP_LOCAL_STAGE"
	// runtimeTokenTTL is the lifetime of the runtime's kcp token in the Secret.
	runtimeTokenTTL = 24 * time.Hour
)

// Files of the repository local applies, as a platform team would.
var (
	serviceProviderFile = filepath.Join("config", "deploy", "serviceprovider", "serviceprovider.yaml")
	runtimeRBACFile     = filepath.Join("config", "kcp", "echo-runtime-rbac.yaml")
	providerConfigFile  = filepath.Join("config", "samples", "echo_v1alpha1_providerconfig_kcp.yaml")
)

type localOptions struct {
	stateDir  string
	repoRoot  string
	verbosity string
}

// LocalCommand starts a whole platform on this machine.
func LocalCommand() *Command {
	o := &localOptions{}
	return &Command{
		Name:  "local",
		Short: "start a local platform (kcp, platform/onboarding/workload/MCP clusters) with the provider in both modes",
		Long: `Starts, on this machine: a kcp server; kube-apiservers standing in for the openMCP platform,
onboarding, workload and MCP clusters; a local stand-in for openMCP's cluster provider that
grants ClusterRequests and AccessRequests against them; then does what a platform team does
(ServiceProvider, provider namespace, kcp provider workspace with the runtime's identity,
ProviderConfig with spec.kcp), runs this binary's init, and runs this binary's run in both modes.
It then prints, for a tenant, the kubeconfig and the commands to create a workspace, bind the
export and create an Echo (and the same for standard mode), and runs until Ctrl-C, which stops
every process it started.

Every file it writes is in --state-dir, emptied at each start; after Ctrl-C only logs/
stays there. The servers come from $KSP_TEST_ASSETS, or hack/test-binaries.sh builds
them into ~/.cache/kcp-serviceprovider on first use (about 20 minutes, once). Run it from
the repository root: it applies the manifests under config/.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer) error {
			fs.StringVar(&o.stateDir, "state-dir", DefaultStateDir, "folder for every file the platform writes; emptied at start")
			fs.StringVar(&o.repoRoot, "repo-root", ".", "the repository root (config/ and hack/ are read from there)")
			fs.StringVar(&o.verbosity, "verbosity", "INFO", "log level of init and run (DEBUG, INFO or ERROR); their logs are in <state-dir>/logs")
			return o.run
		},
	}
}

// progress prints one line per step with its duration.
type progress struct {
	out   io.Writer
	n     int
	total int
}

func (p *progress) step(what string) func(detail string) {
	p.n++
	start := time.Now()
	fmt.Fprintf(p.out, "[%d/%d] %s ...\n", p.n, p.total, what)
	return func(detail string) {
		if detail != "" {
			detail = ": " + detail
		}
		fmt.Fprintf(p.out, "      done in %s%s\n", time.Since(start).Round(100*time.Millisecond), detail)
	}
}

func (o *localOptions) run(ctx context.Context, out io.Writer) error {
	repo, err := filepath.Abs(o.repoRoot)
	if err != nil {
		return err
	}
	for _, f := range []string{serviceProviderFile, runtimeRBACFile, providerConfigFile} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			return fmt.Errorf("%s not found under %s: run from the repository root (make run) or pass --repo-root", f, repo)
		}
	}
	state, err := filepath.Abs(o.stateDir)
	if err != nil {
		return err
	}
	if os.Getenv(stageEnv) != "2" {
		return o.prepare(ctx, out, repo, state)
	}
	return o.serve(ctx, out, repo, state)
}

// prepare empties the state folder, finds the server binaries and re-executes the
// command with TMPDIR and XDG_CACHE_HOME inside the state folder: envtest writes port
// reservations into the user's cache directory as soon as it is loaded, before any of
// our code runs, and temporary files would otherwise land in /tmp.
func (o *localOptions) prepare(ctx context.Context, out io.Writer, repo, state string) error {
	fmt.Fprintf(out, "kcp-serviceprovider local: a local openMCP platform with the echo provider\n")
	if err := resetStateDir(state); err != nil {
		return err
	}
	fmt.Fprintf(out, "state folder: %s\n", state)
	assets, err := localenv.FindAssets(ctx, repo, out)
	if err != nil {
		return err
	}
	for _, d := range []string{"tmp", "cache"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	env := localenv.MergeEnv(os.Environ(),
		stageEnv+"=2",
		localenv.AssetsEnv+"="+assets,
		"TMPDIR="+filepath.Join(state, "tmp"),
		"XDG_CACHE_HOME="+filepath.Join(state, "cache"),
	)
	// Same process id: a terminal's Ctrl-C and `go run` keep working as before.
	return syscall.Exec(self, os.Args, env)
}

// resetStateDir empties a state folder of an earlier run, or creates it. A non-empty
// folder without the marker is refused: it is not ours to delete.
func resetStateDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading state folder: %w", err)
	case len(entries) > 0:
		marker, err := os.ReadFile(filepath.Join(dir, stateMarker))
		if err != nil {
			return fmt.Errorf("%s is not empty and was not written by this command; pick another --state-dir", dir)
		}
		// The marker names the process that wrote it (the pid survives the re-exec).
		if pid, err := strconv.Atoi(strings.TrimSpace(string(marker))); err == nil && pid > 0 && pid != os.Getpid() {
			if syscall.Kill(pid, 0) == nil {
				return fmt.Errorf("%s is in use by another local platform (process %d); stop it or pick another --state-dir", dir, pid)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("emptying the state folder: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the state folder: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, stateMarker), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

// pruneStateDir removes the servers' data (hundreds of megabytes of etcd) once every
// process has stopped, keeping the logs for a look at what happened.
func pruneStateDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "logs" || e.Name() == stateMarker {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serve starts everything, prints the tenant's commands and waits for Ctrl-C.
func (o *localOptions) serve(ctx context.Context, out io.Writer, repo, state string) (err error) {
	assets := os.Getenv(localenv.AssetsEnv)
	env, err := localenv.New(state, assets)
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(env.LogPath("local"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	logger := zap.New(zap.WriteTo(logFile))
	ctrl.SetLogger(logger)

	// A second Ctrl-C while stopping ends the command at once; the kernel then kills
	// every server through its parent-death signal.
	go func() {
		<-ctx.Done()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		fmt.Fprintln(out, "interrupted again: exiting without waiting")
		os.Exit(130)
	}()
	defer func() {
		fmt.Fprintln(out, "stopping every process ...")
		start := time.Now()
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		} else if pruneErr := pruneStateDir(state); pruneErr != nil {
			err = errors.Join(err, pruneErr)
		}
		fmt.Fprintf(out, "stopped in %s; logs stay in %s\n", time.Since(start).Round(100*time.Millisecond), filepath.Join(state, "logs"))
	}()

	l := &localRun{opts: o, out: out, repo: repo, state: state, assets: assets, env: env, log: logger,
		p: &progress{out: out, total: 6}}
	if err := l.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	l.printQuickstart()
	select {
	case <-ctx.Done():
		fmt.Fprintln(out)
		return nil
	case <-l.runProc.Done():
		return fmt.Errorf("run exited: %v\n%s", l.runProc.Err(), localenv.LogTail(l.runProc.Log, 20))
	case err := <-l.platformErr:
		return fmt.Errorf("local platform stopped: %w", err)
	}
}

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
		"root": "root", "tenant": localTenantWorkspace, "provider": localProviderWorkspace,
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
	if err := applyFile(ctx, provider, filepath.Join(l.repo, runtimeRBACFile), nil); err != nil {
		return err
	}
	kubeconfig, err := runtimeKubeconfig(ctx, l.kcp)
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
func runtimeKubeconfig(ctx context.Context, k *localenv.KCP) ([]byte, error) {
	cfg := k.ConfigFor(localProviderWorkspace)
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
		"--provider-name=" + DefaultProviderName,
		"--verbosity=" + l.opts.verbosity,
		"--platform-kubeconfig=" + l.env.KubeconfigPath("platform"),
	}
}

// selfEnv is the environment the openmcp-operator would set.
func selfEnv() []string {
	return []string{"POD_NAMESPACE=" + localNamespace, "POD_NAME=local", envProviderName + "=" + DefaultProviderName}
}

func (l *localRun) runInit(ctx context.Context) error {
	done := l.p.step("init: CRDs on the onboarding and platform clusters, Echo registered at the ServiceProvider")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	proc, err := l.env.StartProcess("init", self, l.selfArgs("init"), selfEnv(), 10*time.Second)
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
	if l.runProc, err = l.env.StartProcess("run", self, args, selfEnv(), 30*time.Second); err != nil {
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

// QuickstartLines are the tenant's commands local prints (and the README's quickstart
// repeats): kcp mode, standard mode, and a look at the workers. state is how the
// commands name the state folder ("$PWD/.local-platform" for the default); manifests
// are named relative to the repository root, where the commands run.
func QuickstartLines(state string) (kcp, standard, workers []string) {
	kubeconfigs := filepath.Join(state, "kubeconfigs")
	kcp = []string{
		fmt.Sprintf(`export PATH="%s:$PATH" KUBECONFIG="%s" KUBECACHEDIR="%s"`,
			filepath.Join(state, "bin"), filepath.Join(kubeconfigs, "kcp.kubeconfig"), filepath.Join(state, "kube-cache")),
		"kubectl --context root create -f config/samples/tenant-workspace.yaml",
		"kubectl --context root wait --for=jsonpath='{.status.phase}'=Ready workspace/tenant",
		"kubectl --context tenant apply -f config/kcp/echo-apibinding.yaml",
		"kubectl --context tenant wait --for=jsonpath='{.status.phase}'=Bound apibinding/echo",
		"kubectl --context tenant apply -f config/samples/echo_v1alpha1_echo.yaml",
		"kubectl --context tenant wait --for=condition=Ready echo/demo --timeout=2m",
	}
	standard = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" apply -f config/samples/echo_v1alpha1_echo.yaml`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
		fmt.Sprintf(`kubectl --kubeconfig "%s" wait --for=condition=Ready echo/demo --timeout=2m`, filepath.Join(kubeconfigs, "onboarding.kubeconfig")),
	}
	workers = []string{
		fmt.Sprintf(`kubectl --kubeconfig "%s" get deployments -A -l app.kubernetes.io/name=echo-worker`, filepath.Join(kubeconfigs, "workload.kubeconfig")),
	}
	return kcp, standard, workers
}

// stateExpr is how the printed commands name the state folder: as the README does for
// the default, absolute otherwise.
func (l *localRun) stateExpr() string {
	if cwd, err := os.Getwd(); err == nil && l.state == filepath.Join(cwd, DefaultStateDir) {
		return "$PWD/" + DefaultStateDir
	}
	return l.state
}

func (l *localRun) printQuickstart() {
	kcp, standard, workers := QuickstartLines(l.stateExpr())
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nThe platform is up: the echo provider runs in standard and kcp mode (logs: %s).\n", filepath.Join(l.state, "logs"))
	fmt.Fprintf(&b, "\nAs a tenant in kcp (kubeconfig %s; contexts root, tenant, provider),\n", l.kcpKubeconfig)
	fmt.Fprintf(&b, "create a workspace, bind the echo export and request the service, from %s:\n\n", l.repo)
	for _, c := range kcp {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nAs a tenant in standard mode (kubeconfig %s; ControlPlane %s/%s is registered):\n\n",
		l.onboardingK, localControlPlaneNamespace, localControlPlaneName)
	for _, c := range standard {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nThe workers, on the workload cluster (kubeconfig %s):\n\n", l.workloadK)
	for _, c := range workers {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "\nPress Ctrl-C to stop every process.\n")
	_, _ = l.out.Write(b.Bytes())
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
