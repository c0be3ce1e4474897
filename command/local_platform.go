package command

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	platform                   *localenv.Platform
	platformClient             client.Client
	runProc                    *localenv.Process
	kcpKubeconfig, onboardingK string
	workloadK                  string
}

func (l *localRun) start(ctx context.Context) error {
	localNamespace, localProviderWorkspace := l.opts.namespace(), l.opts.providerWorkspace()
	// kcp takes about 30 s; the API servers start meanwhile.
	done := l.p.step("kcp, kube-apiservers for the platform, onboarding, workload and MCP clusters, the local platform granting ClusterRequests and AccessRequests, and the kcp workspace " + localProviderWorkspace + " with the runtime's identity")
	var err error
	l.platform, err = l.env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters: []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		Targets:  []string{localenv.PurposeWorkload, localenv.PurposeOnboarding, localenv.PurposeMCP},
		LocalPlatform: localplatform.Options{
			Logger: l.log.WithName("localplatform"),
			// Local runs last a working day; renewals are tested elsewhere.
			TokenTTL: 12 * time.Hour,
		},
		ControlPlanes: []types.NamespacedName{{Namespace: localControlPlaneNamespace, Name: localControlPlaneName}},
		KCP:           true,
		Provider: &localenv.ProviderWorkspace{
			Path:           localProviderWorkspace,
			RBACFile:       filepath.Join(l.repo, l.opts.provider.Local.RuntimeRBAC),
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"},
			TokenTTL:       runtimeTokenTTL,
			Secret:         types.NamespacedName{Namespace: localNamespace, Name: localKCPSecret},
		},
	})
	if err != nil {
		return err
	}
	for _, s := range []*localenv.APIServer{l.platform.Platform, l.platform.Onboarding, l.platform.Workload, l.platform.MCP} {
		fmt.Fprintf(l.out, "      %s cluster at %s\n", s.Name, s.Config.Host)
	}
	done("kcp at " + l.platform.KCP.URL() + "; ControlPlane " + localControlPlaneNamespace + "/" + localControlPlaneName + " registered on the MCP cluster")

	if err := l.writeKubeconfigs(); err != nil {
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
	if err := localenv.ApplyFile(ctx, l.platformClient, filepath.Join(l.repo, providerConfigFile), nil); err != nil {
		return err
	}
	done("")
	return l.runRun(ctx)
}

// writeKubeconfigs writes the clusters' admin kubeconfigs into the state folder and
// links kubectl next to them.
func (l *localRun) writeKubeconfigs() error {
	for _, s := range []*localenv.APIServer{l.platform.Platform, l.platform.Onboarding, l.platform.Workload, l.platform.MCP} {
		if _, err := l.env.WriteFile(l.env.KubeconfigPath(s.Name), s.Kubeconfig()); err != nil {
			return err
		}
	}
	kc, err := l.platform.KCP.Kubeconfig(map[string]string{
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

// platformTeam does the rest of what a platform team does before the provider runs:
// the ServiceProvider and its namespace on the platform cluster. (The kcp provider
// workspace and the runtime's kubeconfig in the Secret spec.kcp names are the
// platform fixture's.)
func (l *localRun) platformTeam(ctx context.Context) error {
	done := l.p.step("platform team: ServiceProvider in namespace " + l.opts.namespace())
	scheme, err := platformScheme()
	if err != nil {
		return err
	}
	if l.platformClient, err = client.New(l.platform.Platform.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := localenv.ApplyFile(ctx, l.platformClient, filepath.Join(l.repo, serviceProviderFile), nil); err != nil {
		return err
	}
	done("")
	return nil
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
		if l.runProc.Exited() {
			return fmt.Errorf("run exited: %w\n%s", l.runProc.Ended(), localenv.LogTail(l.runProc.Log, 20))
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
	provider, err := client.New(l.platform.KCP.ConfigFor(logicalcluster.NewPath(localProviderWorkspace)), client.Options{Scheme: scheme})
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
