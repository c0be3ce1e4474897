package e2ekcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The names of the tests on a platform of their own (TestRuntimeKCPMode,
// TestOperations), and the provider name a replica process serves unless told another;
// a test on the shared platform serves a provider of its own name (kcpEnv).
const (
	spName        = "widgets"
	providerWS    = "root:provider"
	kcpSecretNS   = "default"
	kcpSecretName = "kcp-kubeconfig"
)

func spScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, widget.AddToScheme, apisv1alpha2.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

type tenant struct {
	path logicalcluster.Path
	lc   logicalcluster.Name
	c    client.Client // admin, widget types
}

// kcpEnv is kcp mode running in-process: kcp, a platform and a workload API server,
// the local platform granting workload clusters, and the widget runtime with spec.kcp
// pointing at its provider workspace. On the package's shared platform each test's
// runtime is a provider of its own name, with its own provider workspace, kubeconfig
// Secret and tenants, all under a workspace of the test's own; several run side by
// side as providers do on openMCP.
type kcpEnv struct {
	k        *harness.KCP
	pf, wl   client.Client
	scheme   *runtime.Scheme
	rt       *builder.Runtime[*widget.Widget]
	kcpSpec  *v1alpha1.KCP
	platform *harness.APIServer
	workload *harness.APIServer

	// name is the provider's: its WidgetConfig, APIExport, APIBindings, leases and the
	// label on what it creates.
	name string
	// providerWS is the provider workspace and tenants the parent of the test's
	// tenant workspaces.
	providerWS, tenants logicalcluster.Path
	// secret holds the runtime's kcp kubeconfig on the platform cluster.
	secret types.NamespacedName
}

// setConfig writes the widget ProviderConfig.
func (e *kcpEnv) setConfig(ctx context.Context, t testing.TB, greeting string, kcp *v1alpha1.KCP) {
	t.Helper()
	pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: e.name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.pf, pc, func() error {
		pc.Spec.Greeting, pc.Spec.KCP = greeting, kcp
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// newTenant creates a tenant workspace of the test that binds the provider's export,
// accepting exactly the runtime's claims narrowed to what it labels as its own.
func (e *kcpEnv) newTenant(ctx context.Context, t testing.TB, name string) tenant {
	t.Helper()
	path, lc := e.k.CreateWorkspace(ctx, t, e.tenants, name)
	return e.bindTenant(ctx, t, path, lc)
}

// newTenantOn is newTenant on the given shard.
func (e *kcpEnv) newTenantOn(ctx context.Context, t testing.TB, name, shard string) tenant {
	t.Helper()
	path, lc := e.k.CreateWorkspaceOn(ctx, t, e.tenants, name, shard)
	return e.bindTenant(ctx, t, path, lc)
}

func (e *kcpEnv) bindTenant(ctx context.Context, t testing.TB, path logicalcluster.Path, lc logicalcluster.Name) tenant {
	t.Helper()
	e.k.CreateAPIBinding(ctx, t, path, e.name, e.providerWS, e.name, apiexport.AcceptedClaims(e.name))
	return tenant{path: path, lc: lc, c: harness.NewClient(t, e.k.ConfigFor(path), e.scheme)}
}

// startKCPEnv starts the test's runtime on the package's shared platform of one kcp
// shard and waits until kcp mode runs; declare, if given, adds to the widget's
// declaration (for example its worker's own rights).
func startKCPEnv(ctx context.Context, t *testing.T, opts builder.Options, declare ...func(*builder.Builder[*widget.Widget])) *kcpEnv {
	t.Helper()
	return startKCPEnvOn(ctx, t, sharedPlatform1, opts, declare...)
}

// envPlatform is where a kcpEnv runs: the package's shared platform of a number of kcp
// shards, or a platform of the test's own (for a test that restarts kcp).
type envPlatform struct {
	shards  int
	private bool
}

var (
	sharedPlatform1 = envPlatform{shards: 1}
	sharedPlatform2 = envPlatform{shards: 2}
	privatePlatform = envPlatform{shards: 1, private: true}
)

// runtimeServiceAccount is the runtime's identity in its provider workspace, as
// config/kcp/runtime-rbac.yaml creates it.
var runtimeServiceAccount = types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"}

// widgetPlatform is kcp (of the given number of shards), the platform and workload
// clusters and the local platform granting workload clusters.
func widgetPlatform(configCRD *apiextensionsv1.CustomResourceDefinition, shards int) localenv.PlatformOptions {
	return localenv.PlatformOptions{
		Clusters:  []string{localenv.PurposeWorkload},
		CRDs:      map[string][]*apiextensionsv1.CustomResourceDefinition{localenv.PurposePlatform: {configCRD}},
		KCP:       true,
		KCPShards: shards,
	}
}

// providerWorkspace is the provider workspace at path with the runtime's identity
// there (exactly the shipped RBAC) and its kubeconfig in the Secret spec.kcp names.
func providerWorkspace(path string, secret types.NamespacedName) *localenv.ProviderWorkspace {
	return &localenv.ProviderWorkspace{
		Path:           path,
		RBACFile:       "../../config/kcp/runtime-rbac.yaml",
		ServiceAccount: runtimeServiceAccount,
		Secret:         secret,
	}
}

// sharedPlatform is the package's shared platform of a number of kcp shards.
func sharedPlatform(t testing.TB, shards int) *harness.Platform {
	t.Helper()
	_, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	return harness.SharedPlatform(t, fmt.Sprintf("widgets-%d-shards", shards), widgetPlatform(configCRD, shards))
}

// startKCPEnvOn is startKCPEnv on the given platform.
func startKCPEnvOn(ctx context.Context, t *testing.T, where envPlatform, opts builder.Options, declare ...func(*builder.Builder[*widget.Widget])) *kcpEnv {
	t.Helper()
	e := newKCPEnvOn(ctx, t, where)
	e.start(ctx, t, opts, declare...)
	return e
}

// start starts the runtime of a kcpEnv made by newKCPEnvOn, as startKCPEnvOn does.
func (e *kcpEnv) start(ctx context.Context, t *testing.T, opts builder.Options, declare ...func(*builder.Builder[*widget.Widget])) {
	t.Helper()
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	scheme, p := e.scheme, e.platform
	b := widgetbuilder.New(e.name, scheme, widget.KCPMCPPermissions).KCP(apiexport.FromCRD(e.name, widgetCRD))
	for _, d := range declare {
		d(b)
	}
	e.rt, err = b.Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Platform, opts.Namespace = p.Config, "default"
	if opts.RetryInterval == 0 {
		opts.RetryInterval = time.Second
	}
	// Whatever a test wraps, no Widget is ever written whole (harness.WholeObjectUpdates).
	noPuts, wrap := harness.WholeObjectUpdates(t, "widgets"), opts.WrapTransport
	opts.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return noPuts(rt)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error { return e.rt.Start(ctx, opts) })

	e.kcpSpec = &v1alpha1.KCP{ProviderWorkspace: e.providerWS.String(), KubeconfigSecret: v1alpha1.SecretReference{Name: e.secret.Name, Namespace: e.secret.Namespace}}
	e.setConfig(ctx, t, "hello", e.kcpSpec)
	harness.Eventually(ctx, t, 2*time.Minute, "kcp mode running", func(context.Context) error {
		if !e.rt.KCPActive() {
			return errors.New("not yet")
		}
		return nil
	})
}

// newKCPEnvOn prepares a kcpEnv on the given platform, without a runtime: the
// provider's name, its provider workspace with the runtime's identity, and that
// identity's kubeconfig Secret.
func newKCPEnvOn(ctx context.Context, t *testing.T, where envPlatform) *kcpEnv {
	t.Helper()
	e := &kcpEnv{scheme: spScheme(t)}
	var p *harness.Platform
	if where.private {
		_, configCRD, err := widget.CRDs()
		if err != nil {
			t.Fatal(err)
		}
		e.name, e.providerWS, e.tenants = spName, logicalcluster.NewPath(providerWS), logicalcluster.NewPath("root")
		e.secret = types.NamespacedName{Namespace: kcpSecretNS, Name: kcpSecretName}
		po := widgetPlatform(configCRD, where.shards)
		po.Provider = providerWorkspace(providerWS, e.secret)
		p = harness.StartPlatform(ctx, t, po)
	} else {
		p = sharedPlatform(t, where.shards)
		e.name = "widgets-" + uniqueSuffix()
		if where.shards > 1 {
			// The provider workspace on the root shard, as the tests of a sharded kcp
			// place their tenants relative to it.
			e.tenants, _ = p.KCP.CreateWorkspaceOn(ctx, t, logicalcluster.NewPath("root"), harness.UniqueName(t), localenv.ShardName(0))
			e.providerWS, _ = p.KCP.CreateWorkspaceOn(ctx, t, e.tenants, "provider", localenv.ShardName(0))
		} else {
			e.tenants, _ = p.KCP.OwnWorkspace(ctx, t)
			e.providerWS = e.tenants.Join("provider")
		}
		e.secret = types.NamespacedName{Namespace: kcpSecretNS, Name: "kcp-kubeconfig-" + e.name}
		pw := providerWorkspace(e.providerWS.String(), e.secret)
		pw.ExportName = e.name
		p.PrepareProvider(ctx, t, *pw)
	}
	e.k, e.platform, e.workload = p.KCP, p.Platform, p.Workload
	e.pf, e.wl = harness.NewClient(t, p.Platform.Config, e.scheme), harness.NewClient(t, p.Workload.Config, e.scheme)
	return e
}

// uniqueSuffix is six random hex digits, for names on a shared server.
func uniqueSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestRuntimeKCPMode serves the widget provider (the same code as the standard-mode
// tests) into three kcp workspaces and checks what tenants and operators would.
func TestRuntimeKCPMode(t *testing.T) {
	t.Parallel() // on a platform of its own (it restarts kcp); no bound on time
	ctx := t.Context()
	harness.LogToTest(t)
	// A fast orphan sweep, so that the unbinding tenant's leftovers go within the test
	// and a kcp restart is shown not to trigger it.
	e := startKCPEnvOn(ctx, t, privatePlatform, builder.Options{SweepInterval: 2 * time.Second})
	k, pf, wl, scheme, rt, kcpSpec := e.k, e.pf, e.wl, e.scheme, e.rt, e.kcpSpec
	setConfig := func(t *testing.T, greeting string, kcp *v1alpha1.KCP) { e.setConfig(ctx, t, greeting, kcp) }

	// Three tenants bind the export, accepting exactly the runtime's claims, narrowed
	// to what it labels as its own.
	var tenants []tenant
	for i := 1; i <= 3; i++ {
		tn := e.newTenant(ctx, t, fmt.Sprintf("tenant-%d", i))
		newWidget(ctx, t, tn.c, "main", "blue")
		tenants = append(tenants, tn)
	}
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	// serve adds a tenant after the first ones: a workspace that binds the export and
	// whose widget main is Ready and installed (with the greeting of the later subtests).
	serve := func(t *testing.T, name, color string) (logicalcluster.Path, logicalcluster.Name, client.Client) {
		t.Helper()
		tn := e.newTenant(ctx, t, name)
		newWidget(ctx, t, tn.c, "main", color)
		waitReady(ctx, t, tn.c, main)
		wantConfigMap(ctx, t, wl, tn.lc, "ciao", color)
		return tn.path, tn.lc, tn.c
	}

	t.Run("every tenant becomes Ready with its own credentials", func(t *testing.T) {
		for i, tn := range tenants {
			w := waitReady(ctx, t, tn.c, main)
			if w.Status.Identity != tn.lc.String() {
				t.Errorf("identity %q, want the logical cluster %q", w.Status.Identity, tn.lc)
			}
			// The provider's own status fields and label, written by the runtime
			// through the virtual workspace.
			if len(w.Status.Parts) == 0 || w.Status.Parts[0].Phase != "Installed" {
				t.Errorf("tenant %d: the widget's own status parts = %+v, want its parts with phase Installed", i+1, w.Status.Parts)
			}
			if w.Labels[widget.ColorLabel] == "" {
				t.Errorf("tenant %d: labels %v, want the provider's %s", i+1, w.Labels, widget.ColorLabel)
			}
			cm := &corev1.ConfigMap{}
			if err := wl.Get(ctx, client.ObjectKey{Namespace: cluster.KCPIdentity(tn.lc.String()).TenantNamespace(), Name: "widget"}, cm); err != nil {
				t.Fatal(err)
			}
			if cm.Data["end-user-serves-deployments"] != "false" {
				t.Errorf("tenant %d: the provider was told the workspace serves Deployments (%v)", i+1, cm.Data)
			}
			if cm.Data["server-path"] != "/clusters/"+tn.lc.String() || cm.Data["server-port"] == "" {
				t.Errorf("tenant %d: the worker's endpoint by parts %v, want the workspace's path /clusters/%s", i+1, cm.Data, tn.lc)
			}
			cfg := workerConfig(ctx, t, wl, tn.lc)
			if !strings.HasSuffix(strings.TrimSuffix(cfg.Host, "/"), "/clusters/"+tn.lc.String()) {
				t.Errorf("worker kubeconfig points at %s, want the workspace %s", cfg.Host, tn.lc)
			}
			worker := harness.NewClient(t, cfg, scheme)
			if err := worker.Get(ctx, main, &widget.Widget{}); err != nil {
				t.Errorf("tenant %d: worker cannot read its own Widget: %v", i+1, err)
			}
			if err := worker.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
				t.Errorf("tenant %d: worker listing Secrets: want forbidden, got %v", i+1, err)
			}
			neighbour := tenants[(i+1)%len(tenants)]
			ncfg := rest.CopyConfig(cfg)
			ncfg.Host = strings.TrimSuffix(strings.TrimSuffix(cfg.Host, "/"), tn.lc.String()) + neighbour.lc.String()
			if err := harness.NewClient(t, ncfg, scheme).Get(ctx, main, &widget.Widget{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
				t.Errorf("tenant %d: worker reading its neighbour's Widget: want forbidden, got %v", i+1, err)
			}
			cs := kubernetes.NewForConfigOrDie(cfg)
			_, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, e.name+"-workload", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("tenant %d: worker minting tokens: want forbidden, got %v", i+1, err)
			}
			// On the shared workload cluster the worker's credential is worth nothing:
			// it cannot read the neighbour's kubeconfig Secret there.
			onWorkload := &rest.Config{Host: e.workload.Config.Host, BearerToken: cfg.BearerToken,
				TLSClientConfig: rest.TLSClientConfig{CAData: e.workload.Config.CAData}}
			nns := cluster.KCPIdentity(neighbour.lc.String()).TenantNamespace()
			err = harness.NewClient(t, onWorkload, scheme).Get(ctx, client.ObjectKey{Namespace: nns, Name: "widget-kubeconfig"}, &corev1.Secret{})
			if !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
				t.Errorf("tenant %d: worker reading its neighbour's kubeconfig Secret on the workload cluster: want denied, got %v", i+1, err)
			}
		}
	})

	t.Run("a second object in a workspace is rejected, then promoted", func(t *testing.T) {
		tn := tenants[0]
		second := client.ObjectKey{Namespace: "default", Name: "second"}
		newWidget(ctx, t, tn.c, "second", "red")
		msg := waitReason(ctx, t, tn.c, second, v1alpha1.ReasonNotSingleton)
		if !strings.Contains(msg, "default/main") {
			t.Errorf("message %q does not name the active object", msg)
		}
		w := &widget.Widget{}
		if err := tn.c.Get(ctx, second, w); err != nil {
			t.Fatal(err)
		}
		if len(w.Finalizers) != 0 {
			t.Errorf("a rejected object got finalizers %v", w.Finalizers)
		}
		harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
		waitReady(ctx, t, tn.c, second)
		wantConfigMap(ctx, t, wl, tn.lc, "hello", "red")
	})

	t.Run("a ProviderConfig change reaches every workspace", func(t *testing.T) {
		setConfig(t, "bonjour", kcpSpec)
		for i, tn := range tenants {
			color := "blue"
			if i == 0 {
				color = "red"
			}
			wantConfigMap(ctx, t, wl, tn.lc, "bonjour", color)
		}
	})

	t.Run("the provider reads the platform cluster: a pull secret copied to each workspace's worker", func(t *testing.T) {
		if err := pf.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry"},
			Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}}); err != nil {
			t.Fatal(err)
		}
		harness.Patch(ctx, t, pf, client.ObjectKey{Name: e.name}, func(c *widget.WidgetConfig) { c.Spec.PullSecret = "registry" })
		for _, tn := range tenants[1:] {
			ns := cluster.KCPIdentity(tn.lc.String()).TenantNamespace()
			harness.Eventually(ctx, t, 60*time.Second, ns+"'s copy of the pull secret", func(ctx context.Context) error {
				s := &corev1.Secret{}
				if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget-pull-secret"}, s); err != nil {
					return err
				}
				if string(s.Data[".dockerconfigjson"]) != `{"auths":{}}` {
					return fmt.Errorf("data %v", s.Data)
				}
				return nil
			})
		}
	})

	t.Run("a panicking or rejecting provider shows on the tenant's object; the others are served", func(t *testing.T) {
		tn, other := tenants[2], tenants[1]
		harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Panic = "nil map in the widget factory" })
		if msg := waitReason(ctx, t, tn.c, main, v1alpha1.ReasonProviderPanic); !strings.Contains(msg, "nil map in the widget factory") {
			t.Errorf("message %q does not carry the panic's value", msg)
		}
		harness.Patch(ctx, t, other.c, main, func(w *widget.Widget) { w.Spec.Color = "green" })
		wantConfigMap(ctx, t, wl, other.lc, "bonjour", "green")
		harness.Patch(ctx, t, other.c, main, func(w *widget.Widget) { w.Spec.Color = "blue" })
		wantConfigMap(ctx, t, wl, other.lc, "bonjour", "blue")

		harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) {
			w.Spec.Panic, w.Spec.Fail, w.Spec.Terminal = "", `color "plaid" is not offered`, true
		})
		if msg := waitReason(ctx, t, tn.c, main, v1alpha1.ReasonProviderRejected); msg != `color "plaid" is not offered` {
			t.Errorf("message %q", msg)
		}
		harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Fail, w.Spec.Terminal = "", false })
		waitReady(ctx, t, tn.c, main)
	})

	t.Run("delete cleans up the workspace and the platform", func(t *testing.T) {
		tn := tenants[1]
		harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
		if n := countManaged(ctx, t, tn.c, e.name); n != 0 {
			t.Errorf("%d ServiceAccounts/ClusterRoles/ClusterRoleBindings left in the workspace", n)
		}
		ars, crs, err := listRequests(ctx, pf, tn.lc)
		if err != nil {
			t.Fatal(err)
		}
		if len(ars.Items)+len(crs.Items) != 0 {
			t.Errorf("left on the platform: %d AccessRequests, %d ClusterRequests", len(ars.Items), len(crs.Items))
		}
		ns := cluster.KCPIdentity(tn.lc.String()).TenantNamespace()
		if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("worker ConfigMap: want gone, got %v", err)
		}
	})

	t.Run("unaccepted permission claims show on the tenant's object", func(t *testing.T) {
		path, _ := k.CreateWorkspace(ctx, t, e.tenants, "tenant-no-claims")
		claims := apiexport.AcceptedClaims(e.name)
		for i := range claims {
			claims[i].State = apisv1alpha2.ClaimRejected
		}
		k.CreateAPIBinding(ctx, t, path, e.name, e.providerWS, e.name, claims)
		c := harness.NewClient(t, k.ConfigFor(path), scheme)
		newWidget(ctx, t, c, "main", "blue")
		msg := waitReason(ctx, t, c, main, v1alpha1.ReasonPermissionClaimMissing)
		// The first claim the runtime needs names itself (all are rejected here).
		named := false
		for _, claim := range claims {
			gr := schema.GroupResource{Group: claim.Group, Resource: claim.Resource}
			named = named || strings.Contains(msg, fmt.Sprintf("permission claim %q", gr.String()))
		}
		if !named {
			t.Errorf("message %q does not name a missing claim", msg)
		}
		// Nothing was ordered for a tenant that cannot be served, and its object can
		// still be deleted: no finalizer of ours is left behind.
		harness.DeleteAndWait(ctx, t, c, widgetAt(main))
	})

	t.Run("removing and re-adding spec.kcp stops and starts kcp mode live", func(t *testing.T) {
		tn := tenants[2]
		setConfig(t, "bonjour", nil)
		harness.Eventually(ctx, t, time.Minute, "kcp mode stopped", func(context.Context) error {
			if rt.KCPActive() {
				return errors.New("still running")
			}
			return nil
		})
		// With kcp mode stopped nothing reconciles the tenant's change...
		harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Color = "green" })
		w := &widget.Widget{}
		if err := tn.c.Get(ctx, main, w); err != nil {
			t.Fatal(err)
		}
		if w.Status.ObservedGeneration == w.Generation {
			t.Errorf("observed generation %d caught up while kcp mode was off", w.Generation)
		}
		// ...until it is switched back on.
		setConfig(t, "bonjour", kcpSpec)
		waitReady(ctx, t, tn.c, main)
		wantConfigMap(ctx, t, wl, tn.lc, "bonjour", "green")
	})

	t.Run("an unbound workspace is let go and the others are still served", func(t *testing.T) {
		gone := tenants[2]
		if err := k.ClientFor(t, gone.path).Delete(ctx, &apisv1alpha2.APIBinding{ObjectMeta: metav1.ObjectMeta{Name: e.name}}); err != nil {
			t.Fatal(err)
		}
		setConfig(t, "ciao", kcpSpec)
		wantConfigMap(ctx, t, wl, tenants[0].lc, "ciao", "red")
		if !rt.KCPActive() {
			t.Error("kcp mode stopped after a tenant unbound")
		}
		// Nothing of it is left: neither its worker nor what the runtime ordered for it
		// on the platform (kcp deletes the object with the binding and the deletion
		// sequence runs; the orphan sweep is there for when it cannot).
		harness.Eventually(ctx, t, time.Minute, "worker and platform requests of the unbound workspace swept", func(ctx context.Context) error {
			if n := workloadObjects(ctx, t, wl, gone.lc); n != 0 {
				return fmt.Errorf("%d worker objects left", n)
			}
			if n := platformRequests(ctx, t, pf, gone.lc); n != 0 {
				return fmt.Errorf("%d requests left", n)
			}
			return nil
		})
	})

	t.Run("a kcp restart is survived without restarting the runtime", func(t *testing.T) {
		tn := tenants[0]
		before := requestUIDs(ctx, t, pf, tn.lc)
		k.Restart(t)
		// An existing tenant's change is served again...
		second := client.ObjectKey{Namespace: "default", Name: "second"}
		harness.Patch(ctx, t, tn.c, second, func(w *widget.Widget) { w.Spec.Color = "purple" })
		wantConfigMap(ctx, t, wl, tn.lc, "ciao", "purple")
		waitReady(ctx, t, tn.c, second)
		// ...and a workspace bound after the restart is picked up.
		serve(t, "tenant-after-restart", "orange")
		if !rt.KCPActive() {
			t.Error("kcp mode stopped after the kcp restart")
		}
		// Nothing was swept or re-ordered while kcp was away.
		if after := requestUIDs(ctx, t, pf, tn.lc); !slices.Equal(before, after) {
			t.Errorf("the tenant's platform requests changed across the restart: %v, then %v", before, after)
		}
	})

	t.Run("deleting a whole workspace is not blocked by the runtime and leaves nothing", func(t *testing.T) {
		tn := tenants[0]
		root := k.ClientFor(t, e.tenants)
		if err := root.Delete(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: tn.path.Base()}}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 3*time.Minute, "workspace "+tn.path.String()+" deleted", func(ctx context.Context) error {
			ws := &tenancyv1alpha1.Workspace{}
			if err := localenv.Gone(root.Get(ctx, client.ObjectKey{Name: tn.path.Base()}, ws)); err != nil {
				return fmt.Errorf("%w: %+v", err, ws.Status.Conditions)
			}
			return nil
		})
		harness.Eventually(ctx, t, time.Minute, "platform requests of the deleted workspace removed", func(ctx context.Context) error {
			if n := platformRequests(ctx, t, pf, tn.lc); n != 0 {
				return fmt.Errorf("%d requests left", n)
			}
			return nil
		})
	})

	t.Run("a force-removed workspace: the sweep has the provider delete its objects, then revokes", func(t *testing.T) {
		path, lc, c := serve(t, "tenant-forced", "teal")
		ars, _, err := listRequests(ctx, pf, lc)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ar := range ars.Items {
			ids = append(ids, localplatform.AccessID(&ar))
		}
		if n := accessObjects(ctx, t, wl, ids); len(ids) != 1 || n == 0 {
			t.Fatalf("%d workload AccessRequests, %d access objects on the workload cluster; want 1 and some", len(ids), n)
		}
		// Nothing of the runtime runs for the object from here on (an operator told it
		// to leave the object alone); the workspace is deleted and, stuck on the
		// runtime's finalizer, freed by hand: the object is gone without the deletion
		// sequence, and the workspace with it.
		harness.Patch(ctx, t, c, main, func(w *widget.Widget) { w.Annotations = map[string]string{"openmcp.cloud/operation": "ignore"} })
		root := k.ClientFor(t, e.tenants)
		if err := root.Delete(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: path.Base()}}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, time.Minute, "the widget marked for deletion", func(ctx context.Context) error {
			w := &widget.Widget{}
			if err := c.Get(ctx, main, w); err != nil {
				return err
			}
			if w.DeletionTimestamp.IsZero() {
				return errors.New("not yet")
			}
			return nil
		})
		harness.Patch(ctx, t, c, main, func(w *widget.Widget) { w.Finalizers = nil })
		removed := time.Now()
		// Checked before the sweep can have found the tenant gone three times.
		if n := workloadObjects(ctx, t, wl, lc); n != 2 {
			t.Fatalf("%d worker objects on the workload cluster right after the removal, want 2: nothing but the sweep may remove them", n)
		}
		harness.Eventually(ctx, t, 3*time.Minute, "workspace "+path.String()+" deleted", func(ctx context.Context) error {
			return localenv.Gone(root.Get(ctx, client.ObjectKey{Name: path.Base()}, &tenancyv1alpha1.Workspace{}))
		})
		harness.Eventually(ctx, t, time.Minute, "the force-removed workspace's worker, requests and access swept", func(ctx context.Context) error {
			if n := workloadObjects(ctx, t, wl, lc); n != 0 {
				return fmt.Errorf("%d worker objects left", n)
			}
			if n := platformRequests(ctx, t, pf, lc); n != 0 {
				return fmt.Errorf("%d platform requests left", n)
			}
			if n := accessObjects(ctx, t, wl, ids); n != 0 {
				return fmt.Errorf("%d access ServiceAccounts, roles and bindings left on the workload cluster", n)
			}
			return nil
		})
		t.Logf("worker objects, platform requests and workload access of the force-removed workspace gone %v after its object (sweep every 2s, 3 absences)",
			time.Since(removed).Round(100*time.Millisecond))
	})
}

// workloadObjects counts the widget's objects (its ConfigMap and kubeconfig Secret) for a
// workspace on the workload cluster.
func workloadObjects(ctx context.Context, t testing.TB, wl client.Client, lc logicalcluster.Name) int {
	t.Helper()
	ns := cluster.KCPIdentity(lc.String()).TenantNamespace()
	n := 0
	for name, o := range map[string]client.Object{"widget": &corev1.ConfigMap{}, "widget-kubeconfig": &corev1.Secret{}} {
		err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
		if err == nil {
			n++
		} else if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	return n
}

// accessObjects counts the ServiceAccounts, roles and bindings the local platform
// created on the workload cluster for the given access IDs (the label value of what it
// creates for one AccessRequest).
func accessObjects(ctx context.Context, t testing.TB, wl client.Client, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		for _, l := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
			&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			if err := wl.List(ctx, l, client.MatchingLabels{localplatform.AccessIDLabel: id}); err != nil {
				t.Fatal(err)
			}
			n += meta.LenList(l)
		}
	}
	return n
}

// platformRequests counts the AccessRequests and ClusterRequests ordered for a workspace.
func platformRequests(ctx context.Context, t testing.TB, pf client.Client, lc logicalcluster.Name) int {
	return len(requestUIDs(ctx, t, pf, lc))
}

// listRequests lists the AccessRequests and ClusterRequests ordered for a workspace.
func listRequests(ctx context.Context, pf client.Client, lc logicalcluster.Name) (*clustersv1alpha1.AccessRequestList, *clustersv1alpha1.ClusterRequestList, error) {
	sel := client.MatchingLabels{workspaces.LogicalClusterLabel: lc.String()}
	ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
	if err := pf.List(ctx, ars, sel); err != nil {
		return nil, nil, err
	}
	if err := pf.List(ctx, crs, sel); err != nil {
		return nil, nil, err
	}
	return ars, crs, nil
}

// requestUIDs lists the UIDs of the requests ordered for a workspace, sorted.
func requestUIDs(ctx context.Context, t testing.TB, pf client.Client, lc logicalcluster.Name) []string {
	t.Helper()
	ars, crs, err := listRequests(ctx, pf, lc)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, o := range ars.Items {
		uids = append(uids, string(o.UID))
	}
	for _, o := range crs.Items {
		uids = append(uids, string(o.UID))
	}
	slices.Sort(uids)
	return uids
}

func newWidget(ctx context.Context, t testing.TB, c client.Client, name, color string) {
	t.Helper()
	// A binding is Bound a moment before the workspace's discovery serves the bound
	// resource; only that is retried.
	harness.Eventually(ctx, t, 30*time.Second, "creating widget "+name, func(ctx context.Context) error {
		err := c.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: widget.WidgetSpec{Color: color}})
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			t.Fatalf("creating widget %s: %v", name, err)
		}
		return err
	})
}

func waitReady(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey) *widget.Widget {
	t.Helper()
	harness.Eventually(ctx, t, 2*time.Minute, key.String()+" Ready", func(ctx context.Context) error { return readyErr(ctx, c, key) })
	w := &widget.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func waitReason(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, reason string) string {
	t.Helper()
	harness.Eventually(ctx, t, 2*time.Minute, key.String()+" "+reason, func(ctx context.Context) error { return reasonErr(ctx, c, key, reason) })
	w := &widget.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// workerConfig reads the kubeconfig the provider handed the tenant's worker.
func workerConfig(ctx context.Context, t testing.TB, wl client.Client, lc logicalcluster.Name) *rest.Config {
	t.Helper()
	ns := cluster.KCPIdentity(lc.String()).TenantNamespace()
	s := &corev1.Secret{}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func wantConfigMap(ctx context.Context, t testing.TB, wl client.Client, lc logicalcluster.Name, greeting, color string) {
	t.Helper()
	ns := cluster.KCPIdentity(lc.String()).TenantNamespace()
	harness.Eventually(ctx, t, 2*time.Minute, "widget ConfigMap of "+lc.String(), func(ctx context.Context) error {
		cm := &corev1.ConfigMap{}
		if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget"}, cm); err != nil {
			return err
		}
		if cm.Data["greeting"] != greeting || cm.Data["color"] != color {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
}

// countManaged counts what the runtime created in a workspace.
func countManaged(ctx context.Context, t testing.TB, c client.Client, name string) int {
	t.Helper()
	sel := client.MatchingLabels{apiexport.ManagedByLabel: name}
	sas, crs, crbs := &corev1.ServiceAccountList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}
	n := 0
	for _, l := range []client.ObjectList{sas, crs, crbs} {
		if err := c.List(ctx, l, sel); err != nil {
			t.Fatal(err)
		}
		n += meta.LenList(l)
	}
	return n
}

// serviceAccountKubeconfig mints a token for a ServiceAccount of a workspace and
// writes a kubeconfig for it, as a platform team would for spec.kcp.
func serviceAccountKubeconfig(ctx context.Context, t testing.TB, k *harness.KCP, path, ns, name string) []byte {
	t.Helper()
	raw, err := localenv.ServiceAccountKubeconfig(ctx, k.ConfigFor(logicalcluster.NewPath(path)), ns, name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// widgetAt names the widget at key, for deleting it.
func widgetAt(key client.ObjectKey) *widget.Widget {
	return &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}
