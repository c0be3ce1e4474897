package local

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// The local platform's fixed names. The provider's sample manifests use the same.
const (
	// DefaultStateDir is --state-dir's default, relative to the working directory.
	DefaultStateDir = ".local-platform"
	// localKCPSecret holds the kubeconfig of the runtime's kcp identity
	// (spec.kcp.kubeconfigSecret of the sample ProviderConfig).
	localKCPSecret = "kcp-kubeconfig"
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

type localOptions struct {
	stateDir  string
	repoRoot  string
	verbosity string
	// kcpShards > 1 starts a sharded kcp (localenv.KCPOptions.Shards).
	kcpShards int
	provider  command.Provider
	// surface is the provider as its CRDs describe it, once run has started.
	surface command.Surface
}

// namespace is the provider's namespace on the platform cluster: the
// openmcp-operator's own, where it runs every provider (its POD_NAMESPACE).
func (o *localOptions) namespace() string { return localenv.DefaultOperatorNamespace }

// providerWorkspace is spec.kcp.providerWorkspace of the sample ProviderConfig.
func (o *localOptions) providerWorkspace() string { return "root:providers:" + o.provider.Name }

// Command starts a whole platform on this machine; p.Local names the provider's
// manifests it applies. A binary that has it runs command.Main(p, local.Command(p)).
func Command(p command.Provider) *command.Command {
	o := &localOptions{provider: p}
	return &command.Command{
		Name:  "local",
		Short: "start a local platform (kcp, platform/onboarding/workload/MCP clusters) with the provider in both modes",
		Long: `Starts, on this machine: a kcp server; kube-apiservers standing in for the openMCP platform,
onboarding, workload and MCP clusters; the real openmcp-operator (scheduler, access-request
and deployment controllers); a local stand-in for openMCP's cluster provider that grants
access to those servers; a stand-in for the kubelet that runs the operator's pods as
processes of this binary. Then it does what a platform team does (ServiceProvider, kcp
provider workspace with the runtime's identity, ProviderConfig with spec.kcp): the
operator runs this binary's init as a Job and its run, in both modes, as a Deployment.
It then prints, for a tenant, the kubeconfig and the commands to create a workspace, bind the
export and create a Service object (and the same for standard mode), and runs until Ctrl-C,
which stops every process it started.

Every file it writes is in --state-dir, emptied at each start; after Ctrl-C only logs/
stays there. The servers come from $KSP_TEST_ASSETS, or are built into
~/.cache/kcp-serviceprovider on first use (20 to 40 minutes on two cores, once; the
same as go run github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider-servers).
Run it from the repository root: it applies the manifests under config/ and the
provider's samples.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, io.Writer) error {
			fs.StringVar(&o.stateDir, "state-dir", DefaultStateDir, "folder for every file the platform writes; emptied at start")
			fs.StringVar(&o.repoRoot, "repo-root", ".", "the repository root (config/ and the samples are read from there)")
			fs.StringVar(&o.verbosity, "verbosity", "INFO", "log level of init and run (DEBUG, INFO or ERROR); their logs are in <state-dir>/logs")
			fs.IntVar(&o.kcpShards, "kcp-shards", 1, "kcp shards; 2 or more start a root shard and more, kcp's cache server and its front-proxy, and the runtime's kcp identity is then a client certificate (docs/design/sharded-kcp.md)")
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
	var err error
	if o.surface, err = o.provider.Surface(); err != nil {
		return err
	}
	if o.provider.Local == nil {
		return fmt.Errorf("provider %s has no local setup (command.Provider.Local)", o.provider.Name)
	}
	repo, err := filepath.Abs(o.repoRoot)
	if err != nil {
		return err
	}
	files := []string{o.provider.Local.ProviderConfig}
	if o.provider.Local.RuntimeRBAC != "" {
		files = append(files, o.provider.Local.RuntimeRBAC)
	}
	for _, c := range o.provider.Local.Charts {
		files = append(files, filepath.Join(c.Dir, "Chart.yaml"))
	}
	for _, f := range files {
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
	fmt.Fprintf(out, "%s local: a local openMCP platform with the %s provider\n", filepath.Base(os.Args[0]), o.provider.Name)
	if err := resetStateDir(state); err != nil {
		return err
	}
	fmt.Fprintf(out, "state folder: %s\n", state)
	assets, err := localenv.FindAssets(ctx, out)
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
		p: &progress{out: out, total: 5}}
	if o.provider.Local != nil && len(o.provider.Local.Charts) > 0 {
		l.p.total++ // the charts' push
	}
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
	case err := <-l.platform.Failed():
		return err
	case <-l.platform.KCP.Exited():
		return l.platform.KCP.ExitErr()
	}
}
