package local

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

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/config"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
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
	kubelet                    *localenv.Kubelet
	probe                      string
	kcpKubeconfig, onboardingK string
	workloadK                  string
}

func (l *localRun) start(ctx context.Context) error {
	localNamespace, localProviderWorkspace := l.opts.namespace(), l.opts.providerWorkspace()
	// kcp takes about 30 s; the API servers start meanwhile.
	done := l.p.step("kcp, clusters for the platform, onboarding, workload and MCP (kube-apiserver and kube-controller-manager each; simulated nodes on the workload and MCP clusters), the openmcp-operator's scheduler and access-request controller, the local cluster provider granting access, and the kcp workspace " + localProviderWorkspace + " with the runtime's identity")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	rbac, err := l.runtimeRBAC()
	if err != nil {
		return err
	}
	l.platform, err = l.env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters: []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		Targets:  []string{localenv.PurposeWorkload, localenv.PurposeOnboarding, localenv.PurposeMCP},
		LocalPlatform: localplatform.Options{
			Logger: l.log.WithName("localplatform"),
			// Local runs last a working day; renewals are tested elsewhere.
			TokenTTL: 12 * time.Hour,
		},
		ControlPlanes: []types.NamespacedName{{Namespace: localControlPlaneNamespace, Name: localControlPlaneName}},
		// The operator's deployment controller renders the provider's Job and
		// Deployment (platformTeam); the kubelet stand-in runs them as this binary.
		Deployments: &localenv.KubeletOptions{Images: map[string]string{l.image(): self}},
		KCP:         true,
		KCPShards:   l.opts.kcpShards,
		Flux:        fluxOptions(l.opts.provider.Local.Charts),
		Provider: &localenv.ProviderWorkspace{
			Path:           localProviderWorkspace,
			RBACFile:       rbac,
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"},
			TokenTTL:       runtimeTokenTTL,
			Secret:         types.NamespacedName{Namespace: localNamespace, Name: localKCPSecret},
		},
	})
	if err != nil {
		return err
	}
	l.kubelet = l.platform.Kubelet
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
	urls, err := l.pushCharts(ctx)
	if err != nil {
		return err
	}
	providerConfigFile := l.opts.provider.Local.ProviderConfig
	done = l.p.step("ProviderConfig with spec.kcp (" + providerConfigFile + ")")
	if err := localenv.ApplyFile(ctx, l.platformClient, filepath.Join(l.repo, providerConfigFile), func(u *unstructured.Unstructured) {
		for i, c := range l.opts.provider.Local.Charts {
			_ = unstructured.SetNestedField(u.Object, urls[i], c.URLField...)
		}
	}); err != nil {
		return err
	}
	done("")
	return l.runRun(ctx)
}

// writeKubeconfigs writes the clusters' admin kubeconfigs into the state folder and
// links kubectl next to them.
func (l *localRun) writeKubeconfigs() error {
	state := command.LocalState(l.state) // where the printed commands look for them
	for _, s := range []*localenv.APIServer{l.platform.Platform, l.platform.Onboarding, l.platform.Workload, l.platform.MCP} {
		if _, err := l.env.WriteFile(state.Kubeconfig(s.Name), s.Kubeconfig()); err != nil {
			return err
		}
	}
	kc, err := l.platform.KCP.Kubeconfig(map[string]string{
		"root": "root", "tenant": localTenantWorkspace, "provider": l.opts.providerWorkspace(),
	}, "tenant")
	if err != nil {
		return err
	}
	if l.kcpKubeconfig, err = l.env.WriteFile(state.Kubeconfig("kcp"), kc); err != nil {
		return err
	}
	l.onboardingK, l.workloadK = state.Kubeconfig("onboarding"), state.Kubeconfig("workload")
	bin := filepath.Join(l.state, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return err
	}
	return os.Symlink(filepath.Join(l.assets, "kubectl"), filepath.Join(bin, "kubectl"))
}

// platformTeam does the rest of what a platform team does before the provider runs:
// the ServiceProvider on the platform cluster, which the openmcp-operator's deployment
// controller turns into the init Job and the run Deployment in its namespace; the
// kubelet stand-in runs their pods as this binary. (The kcp provider workspace and the
// runtime's kubeconfig in the Secret spec.kcp names are the platform fixture's.)
func (l *localRun) platformTeam(ctx context.Context) error {
	done := l.p.step("platform team: ServiceProvider " + l.opts.provider.Name + "; the openmcp-operator's deployment controller renders its init Job and run Deployment in " + l.opts.namespace() + ", a kubelet stand-in runs them as this binary")
	scheme, err := command.PlatformScheme()
	if err != nil {
		return err
	}
	if l.platformClient, err = client.New(l.platform.Platform.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ports, err := localenv.FreePorts(2)
	if err != nil {
		return err
	}
	l.probe = "127.0.0.1:" + strconv.Itoa(ports[0])
	// Pods here share this machine's ports: the probes and metrics go to free ones,
	// through the ServiceProvider's own fields (a pod would have its own network).
	sp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
		"metadata": map[string]any{"name": l.opts.provider.Name},
		"spec": map[string]any{
			"image": l.image(), "verbosity": l.opts.verbosity, "runReplicas": int64(1),
			"runCommand": []any{"run", "--health-probe-bind-address=" + l.probe, "--retry-interval=2s"},
			"metrics":    map[string]any{"port": int64(ports[1])},
		},
	}}
	if err := l.platformClient.Create(ctx, sp); err != nil {
		return fmt.Errorf("applying ServiceProvider %s: %w", l.opts.provider.Name, err)
	}
	done("")
	return nil
}

// runtimeRBAC is the file of the runtime's identity and RBAC in the provider
// workspace: the provider's own, or config's generic one for its APIExport.
func (l *localRun) runtimeRBAC() (string, error) {
	if f := l.opts.provider.Local.RuntimeRBAC; f != "" {
		return filepath.Join(l.repo, f), nil
	}
	return l.env.WriteFile("runtime-rbac.yaml", config.KCPRuntimeRBAC(l.opts.surface.ExportName))
}

// image is the ServiceProvider's image: a name only the kubelet stand-in resolves, to
// this binary.
func (l *localRun) image() string { return "local.invalid/" + l.opts.provider.Name + ":local" }

func fluxOptions(charts []command.LocalChart) *localenv.FluxOptions {
	if len(charts) == 0 {
		return nil
	}
	return &localenv.FluxOptions{}
}

// pushCharts pushes the provider's charts to the local registry with the real helm
// CLI and returns their OCI URLs, in the order of Local.Charts.
func (l *localRun) pushCharts(ctx context.Context) ([]string, error) {
	charts := l.opts.provider.Local.Charts
	if len(charts) == 0 {
		return nil, nil
	}
	done := l.p.step("Helm charts pushed to the local OCI registry, which Flux on the platform cluster pulls from")
	urls := make([]string, len(charts))
	for i, c := range charts {
		for _, v := range c.Versions {
			url, err := l.platform.Registry.PushChart(ctx, filepath.Join(l.repo, c.Dir), "charts", v)
			if err != nil {
				return nil, err
			}
			urls[i] = url
		}
	}
	done(strings.Join(urls, ", "))
	return urls, nil
}

// podLogs is the tail of the logs of the pods whose name starts with prefix, for
// error messages.
func (l *localRun) podLogs(prefix string) string {
	var out []string
	for _, log := range l.env.Logs() {
		if strings.HasPrefix(filepath.Base(log), "pod-"+l.opts.namespace()+"-"+prefix) {
			out = append(out, log+":\n"+localenv.LogTail(log, 20))
		}
	}
	return strings.Join(out, "\n")
}

// runInit waits for the operator's init Job, run by the kubelet stand-in.
func (l *localRun) runInit(ctx context.Context) error {
	done := l.p.step("init (Job sp-" + l.opts.provider.Name + "-init): CRDs on the onboarding and platform clusters, " + l.opts.surface.ServiceCRD.Spec.Names.Kind + " registered at the ServiceProvider")
	name := "sp-" + l.opts.provider.Name + "-init"
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		job := &batchv1.Job{}
		if err := l.platformClient.Get(ctx, client.ObjectKey{Namespace: l.opts.namespace(), Name: name}, job); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				return false, fmt.Errorf("init Job %s failed: %s", name, c.Message)
			}
		}
		last = fmt.Sprintf("%d pods failed", job.Status.Failed)
		if refused := l.kubelet.Refused(); len(refused) > 0 {
			return false, errors.Join(refused...)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("init: %w (%s)\n%s", err, last, l.podLogs(name))
	}
	done("")
	return nil
}

// runRun waits for the run Deployment's pod to serve: its readiness probe answers and
// kcp mode has provisioned the APIExport.
func (l *localRun) runRun(ctx context.Context) error {
	done := l.p.step("run (Deployment sp-" + l.opts.provider.Name + "): the provider in standard mode and kcp mode")
	// Ready: the standard-mode manager answers its readiness probe...
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.probe+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("run did not become ready: %w\n%s", err, l.podLogs("sp-"+l.opts.provider.Name))
	}
	// ...and kcp mode has provisioned the APIExport tenants bind.
	scheme := runtime.NewScheme()
	if err := apisv1alpha2.AddToScheme(scheme); err != nil {
		return err
	}
	localProviderWorkspace, exportName := l.opts.providerWorkspace(), l.opts.surface.ExportName
	provider, err := client.New(l.platform.KCP.ConfigFor(logicalcluster.NewPath(localProviderWorkspace)), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		export := &apisv1alpha2.APIExport{}
		if err := provider.Get(ctx, client.ObjectKey{Name: exportName}, export); err != nil {
			return false, nil
		}
		return export.Status.IdentityHash != "", nil
	})
	if err != nil {
		return fmt.Errorf("kcp mode did not provision APIExport %s: %w\n%s", exportName, err, l.podLogs("sp-"+l.opts.provider.Name))
	}
	done("APIExport " + exportName + " provisioned in " + localProviderWorkspace)
	return nil
}
