package testkit

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/config"
	"github.com/openmcp-project/kcp-serviceprovider/internal/conversion"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// Main is the TestMain of a package using the kit: without the test servers it prints
// the one command that builds them and exits 1; it removes what test binaries that
// died left behind.
func Main(m *testing.M) { harness.Main(m) }

// Options are what the kit needs of the provider.
type Options struct {
	// Provider is the provider as its main hands it to command.Main.
	Provider command.Provider
	// Scheme knows the Kubernetes types and the provider's own (Service API and
	// ProviderConfig); the kit's clients use it.
	Scheme *runtime.Scheme
	// ProviderConfig is the provider's ProviderConfig without spec.kcp: the kit names
	// it after the provider, adds spec.kcp for its provider workspace and creates it
	// on the platform cluster before the runtime starts.
	ProviderConfig client.Object
	// Flux starts, on the platform cluster, Flux's source-controller and
	// helm-controller and an OCI registry (see Env.PushChart): for providers that
	// install through Flux.
	Flux bool
	// Prepare, when set, runs once the platform runs and before the ProviderConfig is
	// created: a provider that installs a chart pushes it here (Env.PushChart) and
	// points the ProviderConfig at it.
	Prepare func(t *testing.T, env *Env)
	// MCPClusters, above 1, starts that many MCP API servers instead of one: standard
	// tenants take turns (StandardTenant), so that tenants installing the same thing
	// into the same namespace of their end-user cluster do not meet there. Env.MCP is
	// the first.
	MCPClusters int
	// WaitTimeout bounds each of the kit's waits for the runtime: WaitReady,
	// WaitCondition, and each half of DeleteAndExpectNoLeftovers (the object gone,
	// then nothing of the runtime's left). Default DefaultWaitTimeout.
	WaitTimeout time.Duration
	// Runtime tunes the runtime (Platform, Onboarding and Namespace are the kit's).
	// RetryInterval defaults to one second, SweepInterval to five, so that a test
	// does not wait on the production safety nets. A Provider with Conversion gets its
	// webhook as init and run make it: certificate, onboarding CRD and Conversion are
	// the kit's, on a free local port.
	Runtime builder.Options
}

// Env is a running platform serving the provider in both modes.
type Env struct {
	// Platform, Onboarding, Workload and MCP are admin clients of those clusters.
	Platform, Onboarding, Workload, MCP client.Client
	// ProviderNamespace is the provider's namespace on the platform cluster (the
	// openmcp-operator's), where cluster.ProviderNamespaceFromCtx points; a provider
	// that copies a pull secret from there finds it where the test put it.
	ProviderNamespace string
	// ProviderWorkspace holds the provider's APIExport on the kit's kcp server.
	ProviderWorkspace logicalcluster.Path

	kcp      *harness.KCP
	platform *harness.Platform
	opts     Options
	surface  command.Surface
	// configGVK is the ProviderConfig's kind, from the author's scheme.
	configGVK schema.GroupVersionKind
	// inspect holds admin clients with the harness scheme (openMCP's request types,
	// RBAC, kcp's APIs), which the author's scheme need not know, for the leftover
	// checks; kcp's is the provider workspace's.
	inspect struct{ platform, workload, mcp, kcp client.Client }
	// standardTenants counts the standard tenants, which take turns on the MCPs.
	standardTenants counter
}

// KCPConfig is an admin's config for the kcp workspace at path (KCPTenant's workspace
// is root:<name>; the provider's is ProviderWorkspace): for what a test checks in kcp
// beyond the tenant's own client.
func (e *Env) KCPConfig(path logicalcluster.Path) *rest.Config { return e.kcp.ConfigFor(path) }

// Start starts the platform and the provider's runtime in the test process, and
// returns once kcp mode serves the provider's APIExport. t.Cleanup stops everything.
func Start(t *testing.T, opts Options) *Env {
	t.Helper()
	ctx := t.Context()
	harness.LogToTest(t)
	if opts.Scheme == nil || opts.ProviderConfig == nil {
		t.Fatal("testkit.Options: Scheme and ProviderConfig are required")
	}
	surface, err := opts.Provider.Surface()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	configGVK, err := apiutil.GVKForObject(opts.ProviderConfig, opts.Scheme)
	if err != nil {
		t.Fatalf("testkit: the ProviderConfig's kind: %v", err)
	}
	e := &Env{ProviderNamespace: localenv.DefaultOperatorNamespace, opts: opts, surface: surface, configGVK: configGVK,
		ProviderWorkspace: logicalcluster.NewPath("root:providers:" + opts.Provider.Name)}
	rbac := filepath.Join(t.TempDir(), "runtime-rbac.yaml")
	if err := os.WriteFile(rbac, config.KCPRuntimeRBAC(surface.ExportName), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := types.NamespacedName{Namespace: e.ProviderNamespace, Name: "kcp-kubeconfig"}
	e.platform = harness.StartPlatform(ctx, t, localenv.PlatformOptions{
		Clusters:    []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		MCPClusters: opts.MCPClusters,
		CRDs: map[string][]*apiextensionsv1.CustomResourceDefinition{
			localenv.PurposePlatform: surface.PlatformCRDs, localenv.PurposeOnboarding: {surface.ServiceCRD},
		},
		KCP: true,
		Provider: &localenv.ProviderWorkspace{Path: e.ProviderWorkspace.String(), RBACFile: rbac, Secret: secret,
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"}},
		Flux: fluxOptions(opts.Flux),
	})
	p := e.platform
	e.kcp = p.KCP
	e.Platform, e.Onboarding = harness.NewClient(t, p.Platform.Config, opts.Scheme), harness.NewClient(t, p.Onboarding.Config, opts.Scheme)
	e.Workload, e.MCP = harness.NewClient(t, p.Workload.Config, opts.Scheme), harness.NewClient(t, p.MCP.Config, opts.Scheme)
	e.inspect.platform, e.inspect.workload, e.inspect.mcp = p.Platform.Client, p.Workload.Client, p.MCP.Client
	e.inspect.kcp = harness.NewClient(t, p.KCP.ConfigFor(e.ProviderWorkspace))

	if opts.Prepare != nil {
		opts.Prepare(t, e)
	}
	if err := e.createProviderConfig(ctx, secret); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	rt, err := opts.Provider.NewRuntime(opts.Provider.Name, surface.KCP)
	if err != nil {
		t.Fatalf("testkit: declaring provider %s: %v", opts.Provider.Name, err)
	}
	ro := opts.Runtime
	ro.Platform, ro.Onboarding, ro.Namespace = p.Platform.Config, p.Onboarding.Config, e.ProviderNamespace
	if ro.RetryInterval == 0 {
		ro.RetryInterval = time.Second
	}
	if ro.SweepInterval == 0 {
		ro.SweepInterval = 5 * time.Second
	}
	if ro.MetricsBindAddress == "" {
		ro.MetricsBindAddress = "0"
	}
	if opts.Provider.Conversion != nil && ro.Conversion == nil {
		ro.Conversion = e.conversionWebhook(ctx, t)
	}
	harness.Background(ctx, t, "the "+opts.Provider.Name+" runtime", func(ctx context.Context) error { return rt.Start(ctx, ro) })
	harness.Eventually(ctx, t, 2*time.Minute, "kcp mode serving APIExport "+surface.ExportName, func(ctx context.Context) error {
		return e.kcpModeActive(ctx, rt)
	})
	return e
}

// conversionWebhook prepares the Service API's conversion webhook as init does (its
// certificate in the provider's namespace on the platform cluster, the onboarding CRD
// converting through it), for the runtime to serve on a free local port, which the
// onboarding cluster and kcp reach as localhost.
func (e *Env) conversionWebhook(ctx context.Context, t *testing.T) *builder.ConversionWebhook {
	t.Helper()
	endpoint, bind, caBundle := harness.LocalConversionWebhook(ctx, t, e.inspect.platform, e.ProviderNamespace, e.opts.Provider.Name)
	onboarding := e.platform.Onboarding.Client
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := onboarding.Get(ctx, client.ObjectKeyFromObject(e.surface.ServiceCRD), crd); err != nil {
			return err
		}
		conversion.Configure(crd, endpoint.URL, caBundle)
		return onboarding.Update(ctx, crd)
	})
	if err != nil {
		t.Fatalf("testkit: pointing CRD %s at the conversion webhook: %v", e.surface.ServiceCRD.Name, err)
	}
	return &builder.ConversionWebhook{Scheme: e.opts.Provider.Conversion, URL: endpoint.URL, BindAddress: bind}
}

// createProviderConfig creates the ProviderConfig named after the provider, with
// spec.kcp naming the provider workspace and the runtime's kubeconfig Secret.
func (e *Env) createProviderConfig(ctx context.Context, secret types.NamespacedName) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e.opts.ProviderConfig)
	if err != nil {
		return fmt.Errorf("converting the ProviderConfig: %w", err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(e.configGVK)
	u.SetName(e.opts.Provider.Name)
	kcp, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.KCP{
		ProviderWorkspace: e.ProviderWorkspace.String(),
		KubeconfigSecret:  v1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name},
	})
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedMap(u.Object, kcp, "spec", "kcp"); err != nil {
		return err
	}
	if err := e.Platform.Create(ctx, u); err != nil {
		return fmt.Errorf("creating ProviderConfig %s: %w", u.GetName(), err)
	}
	return nil
}

// kcpModeActive reports whether kcp mode serves, which it does once the APIExport is
// provisioned. A ProviderConfig with a status says so (KCPMode=True, reason Active);
// one without (its type does not implement provider.ProviderConfigStatuser) has no
// condition to wait for, and the runtime in the test process is asked instead.
func (e *Env) kcpModeActive(ctx context.Context, rt command.Runner) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(e.configGVK)
	if err := e.Platform.Get(ctx, client.ObjectKey{Name: e.opts.Provider.Name}, u); err != nil {
		return err
	}
	c := findCondition(u, v1alpha1.ConditionKCPMode)
	if active, ok := rt.(interface{ KCPActive() bool }); ok && c == nil {
		if !active.KCPActive() {
			return fmt.Errorf("ProviderConfig %s (no status): kcp mode not running yet", u.GetName())
		}
		return nil
	}
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonKCPActive {
		return fmt.Errorf("ProviderConfig %s: %s", u.GetName(), describeCondition(c, v1alpha1.ConditionKCPMode))
	}
	return nil
}

func fluxOptions(on bool) *localenv.FluxOptions {
	if !on {
		return nil
	}
	return &localenv.FluxOptions{}
}

// PushChart packages the Helm chart in dir at version with the real helm CLI, pushes
// it to the platform's OCI registry (Options.Flux) and returns its OCI URL without
// tag (oci://<registry>/charts/<chart name>), which Flux pulls over plain HTTP.
func (e *Env) PushChart(t *testing.T, dir, version string) string {
	t.Helper()
	if e.platform.Registry == nil {
		t.Fatal("testkit: PushChart needs Options.Flux")
	}
	url, err := e.platform.Registry.PushChart(t.Context(), dir, "charts", version)
	if err != nil {
		t.Fatalf("testkit: pushing chart %s %s: %v", dir, version, err)
	}
	return url
}

// ProviderOf describes, for Options.Provider, a provider that is not built on
// command.Provider and starts its builder.Runtime itself: its name, its generated CRD
// files (the Service API labelled for the onboarding cluster, the ProviderConfig for
// the platform, as command.Provider.CRDs) and its runtime. newRuntime gets the kcp
// surface the kit derives from those CRDs; a runtime that declares its own with
// builder.KCP may ignore it.
func ProviderOf(name string, crds fs.FS, newRuntime func(kcp apiexport.Provisionable) (command.Runner, error)) command.Provider {
	return command.Provider{Name: name, CRDs: crds, NewRuntime: func(_ string, kcp apiexport.Provisionable) (command.Runner, error) {
		return newRuntime(kcp)
	}}
}
