package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

const (
	providerWS    = "root:provider"
	kcpSecretNS   = "default"
	kcpSecretName = "kcp-kubeconfig"
)

// phase is one measured phase: a runtime (or the floor client) bringing n objects to
// Ready.
type phase struct {
	n       int
	total   time.Duration   // first creation to last Ready
	lat     []time.Duration // per object, sorted
	reqs    snapshot        // requests during the phase
	rssBase float64         // MiB before the phase
	rssPeak float64         // MiB, peak during the phase
	heap    float64         // MiB of Go heap in use at the end
	startup snapshot        // requests from start until serving (runtime only)
	steady  snapshot        // requests in the steady-state window
	window  time.Duration
	// opErrors counts the real openmcp-operator's scheduler and access-request
	// controller errors until convergence (each one a backoff); -1 with the stand-in.
	opErrors float64
	// newcomers: after the steady state, tenants bound one at a time, each creating
	// one object: creation to Ready, sorted (runtime only).
	newcomers []time.Duration
}

type kcpResult struct {
	n     int
	setup time.Duration // workspaces and bindings
	floor phase
	// pfloor is the floor that also waits for the platform's grants
	// (platformFloor): the pace the runtime is held to.
	pfloor phase
	rt     phase
	// baseline names the commit whose runtime ran (-baseline); empty for this one.
	baseline string
}

type kcpEnv struct {
	env      *localenv.Env
	k        *localenv.KCP
	platform *localenv.APIServer
	pf       client.Client
	provider client.Client
	// kubeconfig is the runtime's identity, as spec.kcp's Secret holds it: a
	// ServiceAccount of the provider workspace on a kcp of one shard, a user with a
	// client certificate on a sharded kcp (docs/design/sharded-kcp.md).
	kubeconfig []byte
	// vwID and directID are that identity for the benchmark's own clients (the floor
	// and the watchers), without a host: vwID for the virtual workspaces, directID
	// for the floor's direct TokenRequests through kcp's URL. On one shard they are
	// two more tokens of the ServiceAccount, so that no client of the benchmark
	// shares the runtime's token; on a sharded kcp both are the client certificate,
	// one credential for both as the runtime itself has there.
	vwID, directID *rest.Config
	runtimeID      string // its kcp user name, which the floor binds
	surface        apiexport.Provisionable
	tenants        []tenant
	vwURL          string // the first virtual workspace: the only one on one shard
	// vwURLs are the virtual workspaces of every shard with a binding; shardVW maps
	// each shard holding a tenant to its own (sharded kcp only).
	vwURLs   []string
	shardVW  map[string]string
	shards   int
	placed   atomic.Int64       // tenants placed so far, for the next one's shard
	operator *localenv.Operator // nil with the stand-in scheduler
}

type tenant struct {
	path logicalcluster.Path
	lc   logicalcluster.Name
	// shard is the shard the workspace was placed on (ShardName); "" on a kcp of one
	// shard.
	shard string
	c     client.Client // admin
}

// runKCP measures kcp mode with n tenant workspaces on a fresh kcp.
func runKCP(ctx context.Context, env *localenv.Env, n int, opts benchOptions) (*kcpResult, error) {
	// Ends the watches of this run before its servers stop: an open watch holds up a
	// kube-apiserver's shutdown.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &kcpResult{n: n, baseline: opts.baseline}
	e, err := startKCPEnv(ctx, env, opts.standIn, 1)
	if err != nil {
		return nil, err
	}
	setupStart := time.Now()
	if err := e.createTenants(ctx, n); err != nil {
		return nil, err
	}
	res.setup = time.Since(setupStart)
	logf("kcp n=%d: %d workspaces bound in %s", n, n, res.setup.Round(time.Second))

	if !opts.skipFloor {
		if res.floor, err = e.floor(ctx, writesFloor); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		logf("kcp n=%d: floor %s", n, res.floor.total.Round(time.Millisecond))
		if res.pfloor, err = e.floor(ctx, platformFloor); err != nil {
			return nil, fmt.Errorf("floor with the platform: %w", err)
		}
		logf("kcp n=%d: floor with the platform %s", n, res.pfloor.total.Round(time.Millisecond))
	}
	if res.rt, err = e.runtime(ctx, opts); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	logf("kcp n=%d: runtime %s", n, res.rt.total.Round(time.Millisecond))
	return res, nil
}

// startKCPEnv starts the local platform with a kcp of the given number of shards
// (tenants are then spread over them) and provisions the export.
func startKCPEnv(ctx context.Context, env *localenv.Env, standIn bool, shards int) (*kcpEnv, error) {
	e := &kcpEnv{env: env, shards: shards}
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		return nil, err
	}
	e.surface = apiexport.FromCRD(providerName, widgetCRD)
	lp, err := env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters:         []string{localenv.PurposeWorkload},
		CRDs:             map[string][]*apiextensionsv1.CustomResourceDefinition{localenv.PurposePlatform: {configCRD}},
		LocalPlatform:    localplatform.Options{MaxConcurrentReconciles: 16},
		StandInScheduler: standIn,
		// The local platform must never be what the runtime waits for.
		ClientQPS: 1000, ClientBurst: 2000,
		KCP: true, KCPShards: shards,
		Provider: &localenv.ProviderWorkspace{
			Path:           providerWS,
			RBACFile:       filepath.Join(repoRoot(), "config/kcp/runtime-rbac.yaml"),
			ServiceAccount: types.NamespacedName{Namespace: "kcp-serviceprovider", Name: "runtime"},
			Secret:         types.NamespacedName{Namespace: kcpSecretNS, Name: kcpSecretName},
		},
	})
	if err != nil {
		return nil, err
	}
	e.k, e.platform, e.kubeconfig, e.operator = lp.KCP, lp.Platform, lp.RuntimeKubeconfig, lp.Operator
	if e.pf, err = client.New(fast(e.platform.Config), client.Options{Scheme: benchScheme()}); err != nil {
		return nil, err
	}
	admin := e.k.ConfigFor(logicalcluster.NewPath(providerWS))
	if e.provider, err = client.New(fast(admin), client.Options{Scheme: benchScheme()}); err != nil {
		return nil, err
	}
	if err := e.runtimeIdentity(ctx, admin, lp.ProviderCluster); err != nil {
		return nil, fmt.Errorf("the runtime's identity: %w", err)
	}
	// The export exists before tenants bind; the runtime provisions it again on
	// start (a no-op).
	surface, err := e.surface.APISurface()
	if err != nil {
		return nil, err
	}
	if _, err := apiexport.Provision(ctx, e.provider, surface, apiexport.Options{}); err != nil {
		return nil, fmt.Errorf("provisioning the export: %w", err)
	}
	return e, nil
}

// runtimeIdentity sets the runtime's identity for the benchmark's own clients
// (vwID, directID) and its kcp user name (runtimeID).
func (e *kcpEnv) runtimeIdentity(ctx context.Context, admin *rest.Config, providerCluster logicalcluster.Name) error {
	if !e.k.Sharded() {
		// Two more tokens of the runtime's ServiceAccount: one for the floor and the
		// watcher, one for the floor's direct TokenRequests.
		ids := make([]*rest.Config, 2)
		for i := range ids {
			tok, err := localenv.ServiceAccountToken(ctx, admin, "kcp-serviceprovider", "runtime", 24*time.Hour)
			if err != nil {
				return err
			}
			ids[i] = &rest.Config{BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: e.k.AdminConfig().CAData}}
		}
		e.vwID, e.directID = ids[0], ids[1]
		e.runtimeID = "system:kcp:serviceaccount:" + providerCluster.String() + ":kcp-serviceprovider:runtime"
		return nil
	}
	// Another shard refuses the provider workspace's ServiceAccount tokens (401): the
	// runtime is the client-certificate user of its kubeconfig, and so is the floor.
	id, err := clientcmd.RESTConfigFromKubeConfig(e.kubeconfig)
	if err != nil {
		return err
	}
	id.Host = ""
	e.vwID, e.directID = id, rest.CopyConfig(id)
	e.runtimeID, err = certificateUser(id.CertData)
	return err
}

// certificateUser is the user name kcp, like any Kubernetes API server, takes from
// a client certificate: its subject's common name.
func certificateUser(certPEM []byte) (string, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return "", errors.New("the kubeconfig holds no client certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	if cert.Subject.CommonName == "" {
		return "", errors.New("the client certificate names no user")
	}
	return cert.Subject.CommonName, nil
}

// createTenants creates n workspaces and binds the export in each (setup, not
// measured: kcp's own workspace and binding rates would dominate every figure).
func (e *kcpEnv) createTenants(ctx context.Context, n int) error {
	e.tenants = make([]tenant, n)
	err := parallel(n, concurrency, func(i int) error {
		var err error
		if e.tenants[i], err = e.createTenant(ctx, fmt.Sprintf("tenant-%d", i)); err != nil {
			return err
		}
		if (i+1)%50 == 0 {
			logf("  %d workspaces", i+1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if e.shards == 1 {
		urls, err := e.k.VirtualWorkspaceURLs(ctx, logicalcluster.NewPath(providerWS), providerName)
		if err != nil {
			return err
		}
		e.vwURL, e.vwURLs = urls[0], urls
		return nil
	}
	// The endpoint slice lists a shard's virtual workspace once a binding there
	// reached it, which may come after the binding is Bound: wait until it lists the
	// shard of every tenant, or a watch of the listed ones would miss that shard's
	// objects and the floor would have nowhere to reach them.
	return localenv.Poll(ctx, time.Minute, "the virtual workspace of every shard with a tenant", func(ctx context.Context) error {
		urls, err := e.k.VirtualWorkspaceURLs(ctx, logicalcluster.NewPath(providerWS), providerName)
		if err != nil {
			return err
		}
		byShard, err := e.shardVirtualWorkspaces(ctx, urls)
		if err != nil {
			return err
		}
		for _, tn := range e.tenants {
			if _, ok := byShard[tn.shard]; !ok {
				return fmt.Errorf("none of shard %s yet (listed: %v)", tn.shard, urls)
			}
		}
		e.vwURL, e.vwURLs, e.shardVW = urls[0], urls, byShard
		return nil
	})
}

// shardVirtualWorkspaces maps each URL of the export's endpoint slice to the name of
// its shard, the value of the Shard object's "name" label (which the workspaces'
// location selector matches, CreateWorkspaceOn). kcp builds each URL by appending
// the export's path to its Shard's spec.virtualWorkspaceURL.
func (e *kcpEnv) shardVirtualWorkspaces(ctx context.Context, urls []string) (map[string]string, error) {
	root, err := client.New(e.k.AdminConfig(), client.Options{Scheme: benchScheme()})
	if err != nil {
		return nil, err
	}
	shards := &kcpcorev1alpha1.ShardList{}
	if err := root.List(ctx, shards); err != nil {
		return nil, fmt.Errorf("listing shards: %w", err)
	}
	byShard := map[string]string{}
	for _, url := range urls {
		var owner *kcpcorev1alpha1.Shard
		for i := range shards.Items {
			s := &shards.Items[i]
			base := strings.TrimSuffix(s.Spec.VirtualWorkspaceURL, "/")
			if base == "" || !strings.HasPrefix(url, base+"/") {
				continue
			}
			if owner != nil {
				return nil, fmt.Errorf("virtual workspace %s belongs to shards %s and %s", url, owner.Name, s.Name)
			}
			owner = s
		}
		if owner == nil {
			return nil, fmt.Errorf("virtual workspace %s belongs to no shard", url)
		}
		name := owner.Labels["name"]
		if name == "" {
			return nil, fmt.Errorf("shard %s has no name label", owner.Name)
		}
		byShard[name] = url
	}
	return byShard, nil
}

// vwURLOf is the virtual workspace of the export on tn's shard.
func (e *kcpEnv) vwURLOf(tn tenant) string {
	if tn.shard == "" {
		return e.vwURL
	}
	return e.shardVW[tn.shard]
}

// createTenant creates a workspace under root and binds the export there with the
// claims the runtime asks for accepted.
func (e *kcpEnv) createTenant(ctx context.Context, name string) (tenant, error) {
	shard := ""
	if e.shards > 1 {
		// Spread evenly: kcp's own choice is random.
		shard = localenv.ShardName(int(e.placed.Add(1)) % e.shards)
	}
	path, lc, err := e.k.CreateWorkspaceOn(ctx, logicalcluster.NewPath("root"), name, shard)
	if err != nil {
		return tenant{}, err
	}
	if _, err := e.k.CreateAPIBinding(ctx, path, providerName, logicalcluster.NewPath(providerWS), providerName, apiexport.AcceptedClaims(providerName)); err != nil {
		return tenant{}, err
	}
	c, err := client.New(fast(e.k.ConfigFor(path)), client.Options{Scheme: benchScheme()})
	if err != nil {
		return tenant{}, err
	}
	return tenant{path: path, lc: lc, shard: shard, c: c}, nil
}

// createWidget creates the Widget name in tn's workspace, once the bound resource is
// served (a moment after the binding is Bound), and returns when it was created.
func createWidget(ctx context.Context, tn tenant, name string) (time.Time, error) {
	err := localenv.Poll(ctx, time.Minute, "creating widget in "+tn.lc.String(), func(ctx context.Context) error {
		err := tn.c.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: widget.WidgetSpec{Color: "blue"}})
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("fatal: %w", err)
		}
		return err
	})
	return time.Now(), err
}

// newcomers binds n more tenants one at a time, with every other workspace engaged;
// each creates one Widget once it is served, and the next tenant comes once that one
// is Ready. It returns creation to Ready of each, sorted.
func (e *kcpEnv) newcomers(ctx context.Context, watcher *readyWatcher, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range n {
		tn, err := e.createTenant(ctx, fmt.Sprintf("newcomer-%d", i))
		if err != nil {
			return nil, err
		}
		created, err := createWidget(ctx, tn, "main")
		if err != nil {
			return nil, err
		}
		ready, err := watcher.waitAll(ctx, len(e.tenants)+i+1, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("newcomer %d: %w", i, err)
		}
		r, ok := ready[tn.lc.String()+"/default/main"]
		if !ok {
			return nil, fmt.Errorf("newcomer %d: another object became Ready instead", i)
		}
		out = append(out, r.Sub(created))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// createWidgets creates one Widget named name in every tenant workspace, all at
// once, and returns when each was created.
func (e *kcpEnv) createWidgets(ctx context.Context, name string) (map[string]time.Time, error) {
	var mu sync.Mutex
	created := map[string]time.Time{}
	err := parallel(len(e.tenants), 4*concurrency, func(i int) error {
		tn := e.tenants[i]
		at, err := createWidget(ctx, tn, name)
		if err != nil {
			return err
		}
		mu.Lock()
		created[tn.lc.String()+"/default/"+name] = at
		mu.Unlock()
		return nil
	})
	return created, err
}

// runtime starts this runtime in kcp mode, in a process of its own (child.go), and
// measures it bringing one object per tenant to Ready.
func (e *kcpEnv) runtime(ctx context.Context, opts benchOptions) (phase, error) {
	p := phase{n: len(e.tenants)}
	watchCfg := rest.CopyConfig(e.vwID)
	watchCfg.Host = e.vwURL + "/clusters/*"
	watcher, err := watchReady(ctx, watchCfg)
	if err != nil {
		return p, err
	}
	rt, err := startRuntimeProcess(ctx, e.env, "runtime", e.platform.Kubeconfig(), opts, false)
	if err != nil {
		return p, err
	}
	started := time.Now()
	if err := e.pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{
		Greeting: "hello",
		KCP:      &v1alpha1.KCP{ProviderWorkspace: providerWS, KubeconfigSecret: v1alpha1.SecretReference{Name: kcpSecretName, Namespace: kcpSecretNS}},
	}}); err != nil {
		return p, err
	}
	if err := localenv.Poll(ctx, 5*time.Minute, "kcp mode running", func(context.Context) error { return rt.active() }); err != nil {
		return p, err
	}
	quiesce(rt.snapshot, 2*time.Second, time.Minute)
	logf("  kcp mode running and quiet after %s", time.Since(started).Round(time.Millisecond))
	if p.startup, err = rt.snapshot(); err != nil {
		return p, err
	}
	resetPeakRSS(rt.pid())
	p.rssBase, _ = rss(rt.pid())
	rt.saveProfiles(fmt.Sprintf("kcp-%d%s-engaged", len(e.tenants), opts.baseline))

	before, err := rt.snapshot()
	if err != nil {
		return p, err
	}
	start := time.Now()
	created, err := e.createWidgets(ctx, "main")
	if err != nil {
		return p, err
	}
	ready, err := watcher.waitAll(ctx, len(e.tenants), convergeTimeout(len(e.tenants)))
	if err != nil {
		return p, err
	}
	after, err := rt.snapshot()
	if err != nil {
		return p, err
	}
	p.reqs = after.sub(before)
	p.total = lastOf(ready).Sub(start)
	p.lat = latencies(created, ready)
	_, p.rssPeak = rss(rt.pid())
	p.heap = rt.heap()
	p.opErrors = operatorErrors(ctx, e.operator)
	rt.saveProfiles(fmt.Sprintf("kcp-%d%s-converged", len(e.tenants), opts.baseline))

	// Steady state: nothing changes for a while; whatever the runtime does now is
	// overhead. (This wait is the measurement window, not a synchronisation.)
	s0, err := rt.snapshot()
	if err != nil {
		return p, err
	}
	time.Sleep(opts.steady)
	s1, err := rt.snapshot()
	if err != nil {
		return p, err
	}
	p.steady = s1.sub(s0)
	p.window = opts.steady
	if _, peak := rss(rt.pid()); peak > p.rssPeak {
		p.rssPeak = peak
	}
	if opts.newcomers > 0 {
		if p.newcomers, err = e.newcomers(ctx, watcher, opts.newcomers); err != nil {
			return p, fmt.Errorf("newcomers: %w", err)
		}
	}
	return p, nil
}

// kcpRuntime is the runtime under test in kcp mode, built as a provider's main builds
// it.
func kcpRuntime(surface apiexport.Provisionable) (*builder.Runtime[*widget.Widget], error) {
	return builder.ServiceProvider[*widget.Widget](providerName, benchScheme()).
		For(&widget.Widget{}).
		WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(workloadPerms).
		MCPPermissions(kcpMCPPerms).
		KCP(surface).
		Complete(noop{})
}

func convergeTimeout(n int) time.Duration { return 3*time.Minute + time.Duration(n)*time.Second }

func ensureNS(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// repoRoot is the main module's folder: the benchmark runs from test/bench.
func repoRoot() string {
	if d := os.Getenv("KSP_REPO_ROOT"); d != "" {
		return d
	}
	return "../.."
}
