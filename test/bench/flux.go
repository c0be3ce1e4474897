package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter"
	greeterv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/examples/greeter/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// The Flux part (-flux-sizes) measures the greeter example provider
// (examples/greeter) in standard mode, installing its chart for n ControlPlanes through
// Flux, against Flux alone installing the same n releases from objects a bare client
// writes: how much the runtime adds on top of Flux's own pace.

const (
	// fluxChartVersion is the greeter chart's version both sides install.
	fluxChartVersion = "0.1.0"
	// fluxKubeconfigSecret is the floor's Secret holding an MCP server's admin
	// kubeconfig, in each tenant's platform namespace.
	fluxKubeconfigSecret = "greeter-mcp-kubeconfig"
)

// fluxInterval is the OCIRepository's and the HelmRelease's interval on both sides
// (the greeter's default).
var fluxInterval = metav1.Duration{Duration: time.Minute}

// fluxRun is one size, measured with the greeter provider and with Flux alone, each
// on a fresh platform.
type fluxRun struct {
	n                       int
	provider, floor, pfloor phase
	providerFailed          bool
	floorFailed             bool
	pfloorFailed            bool
	// Per tenant, sorted: the provider's object created to its HelmRelease written
	// (the runtime, the openmcp-operator granting the ControlPlane's access, the
	// provider's writes), HelmRelease written to Ready (Flux), HelmRelease Ready to
	// the object Ready (the provider seeing it); the floor's first write to its
	// HelmRelease written, and HelmRelease written to Ready.
	provToRelease, provFlux, provToReady []time.Duration
	floorToRelease, floorFlux            []time.Duration
	// The platform floor's first request to its HelmRelease written (the grants),
	// and HelmRelease written to Ready.
	pfloorToRelease, pfloorFlux []time.Duration
}

func fluxScheme() *k8sruntime.Scheme {
	s, err := greeter.NewScheme()
	if err != nil {
		panic(err)
	}
	if err := clustersv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func fluxTimeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*5*time.Second }

// fluxNamespace is the platform namespace of the i-th tenant's ControlPlane, where
// both sides write the tenant's Flux objects.
func fluxNamespace(i int) (string, error) {
	return libutils.StableMCPNamespace(cpName(i), tenantNamespace)
}

// startFluxPlatform starts the platform both sides run on: onboarding, workload and
// n MCP API servers, the real openmcp-operator with the local platform as cluster
// provider, an OCI registry with the greeter chart and Flux's source-controller and
// helm-controller on the platform cluster. It returns the chart's OCI URL.
func startFluxPlatform(ctx context.Context, env *localenv.Env, n int) (*localenv.Platform, string, error) {
	d := greeter.Description()
	surface, err := d.Surface()
	if err != nil {
		return nil, "", err
	}
	lp, err := env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters:    []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		MCPClusters: n,
		CRDs: map[string][]*apiextensionsv1.CustomResourceDefinition{
			localenv.PurposePlatform: surface.PlatformCRDs, localenv.PurposeOnboarding: {surface.ServiceCRD},
		},
		LocalPlatform: localplatform.Options{MaxConcurrentReconciles: 16},
		// The local platform must never be what the runtime waits for.
		ClientQPS: 1000, ClientBurst: 2000,
		Flux: &localenv.FluxOptions{},
	})
	if err != nil {
		return nil, "", err
	}
	chart := filepath.Join(repoRoot(), "examples", "greeter", "chart", "greeter")
	url, err := lp.Registry.PushChart(ctx, chart, "charts", fluxChartVersion)
	if err != nil {
		return nil, "", fmt.Errorf("pushing chart %s: %w", chart, err)
	}
	return lp, url, nil
}

// runFluxProvider measures the greeter provider in standard mode: n ControlPlanes,
// each on its own MCP server, and n Greeters created at once on the onboarding
// cluster; time from the first creation to the last Greeter Ready.
func runFluxProvider(ctx context.Context, env *localenv.Env, n int, opts benchOptions, r *fluxRun) (phase, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := phase{n: n}
	lp, url, err := startFluxPlatform(ctx, env, n)
	if err != nil {
		return p, err
	}
	scheme := fluxScheme()
	ob, err := client.New(fast(lp.Onboarding.Config), client.Options{Scheme: scheme})
	if err != nil {
		return p, err
	}
	pf, err := client.New(fast(lp.Platform.Config), client.Options{Scheme: scheme})
	if err != nil {
		return p, err
	}
	if err := ensureNS(ctx, ob, tenantNamespace); err != nil {
		return p, err
	}
	// StandardTenant's turns: the i-th ControlPlane on the i-th MCP server.
	if err := parallel(n, concurrency, func(i int) error {
		return lp.Local.RegisterControlPlane(ctx, cpName(i), tenantNamespace, localenv.MCPTargetName(i%len(lp.MCPs)))
	}); err != nil {
		return p, err
	}
	if err := pf.Create(ctx, &greeterv1alpha1.GreeterConfig{ObjectMeta: metav1.ObjectMeta{Name: greeter.DefaultName},
		Spec: greeterv1alpha1.GreeterConfigSpec{ChartURL: url, ChartVersion: fluxChartVersion, Interval: &fluxInterval}}); err != nil {
		return p, err
	}
	greeters, err := watchReadyOf(ctx, greeterv1alpha1.GroupVersion.WithResource("greeters"), lp.Onboarding.Config)
	if err != nil {
		return p, err
	}
	releases, err := watchReadyOf(ctx, helmv2.GroupVersion.WithResource("helmreleases"), lp.Platform.Config)
	if err != nil {
		return p, err
	}

	// Standard mode only: no kcp surface.
	rt, err := greeter.NewRuntime(greeter.DefaultName, nil)
	if err != nil {
		return p, err
	}
	cnt := newCounter()
	rctx, stopRuntime := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rt.Start(rctx, builder.Options{
			Platform: lp.Platform.Config, Onboarding: lp.Onboarding.Config, Namespace: "default",
			RetryInterval: opts.retry, MaxConcurrentReconciles: opts.concurrency,
			ClientQPS: opts.qps, ClientBurst: opts.burst, WrapTransport: cnt.wrap,
		}); err != nil && rctx.Err() == nil {
			logf("greeter runtime stopped: %v", err)
		}
	}()
	defer func() { stopRuntime(); <-done }()
	cnt.quiesce(2*time.Second, time.Minute)

	before := cnt.snapshot()
	start := time.Now()
	created, err := createTimed(ctx, ob, n, 4*concurrency, func(i int) client.Object {
		return &greeterv1alpha1.Greeter{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: cpName(i)},
			Spec: greeterv1alpha1.GreeterSpec{Message: "hello " + cpName(i)}}
	})
	if err != nil {
		return p, err
	}
	ready, err := greeters.waitAll(ctx, n, fluxTimeout(n))
	if err != nil {
		return p, err
	}
	p.reqs = cnt.snapshot().sub(before)
	p.total = lastOf(ready).Sub(start)
	p.lat = latencies(created, ready)
	p.opErrors = operatorErrors(ctx, lp.Operator)

	// Where each tenant's time went, from the watch of its HelmRelease.
	relReady, err := releases.waitAll(ctx, n, time.Minute)
	if err != nil {
		return p, fmt.Errorf("HelmReleases: %w", err)
	}
	relSeen := releases.firstSeen()
	for i := range n {
		ns, err := fluxNamespace(i)
		if err != nil {
			return p, err
		}
		obj, rel := "/"+tenantNamespace+"/"+cpName(i), "/"+ns+"/"+greeter.ReleaseName
		c, s, rr, gr := created[obj], relSeen[rel], relReady[rel], ready[obj]
		if s.IsZero() || rr.IsZero() {
			return p, fmt.Errorf("no HelmRelease %s seen for %s", rel, obj)
		}
		r.provToRelease = append(r.provToRelease, s.Sub(c))
		r.provFlux = append(r.provFlux, rr.Sub(s))
		r.provToReady = append(r.provToReady, gr.Sub(rr))
	}
	sortDurations(r.provToRelease, r.provFlux, r.provToReady)
	return p, nil
}

// startFluxFloorPlatform is startFluxPlatform for a floor: it also returns the bare
// client the floor writes with.
func startFluxFloorPlatform(ctx context.Context, env *localenv.Env, n int) (*localenv.Platform, string, client.Client, error) {
	lp, url, err := startFluxPlatform(ctx, env, n)
	if err != nil {
		return nil, "", nil, err
	}
	pf, err := client.New(fast(lp.Platform.Config), client.Options{Scheme: fluxScheme()})
	return lp, url, pf, err
}

// runFluxFloor measures Flux alone on a platform like runFluxProvider's: a bare
// client writes, per tenant, a Secret with the admin kubeconfig of the tenant's MCP
// server, the OCIRepository and the HelmRelease the greeter would write (standard
// mode), n tenants with the runtime's work-queue concurrency; time from the first
// write to the last HelmRelease Ready.
func runFluxFloor(ctx context.Context, env *localenv.Env, n int, r *fluxRun) (phase, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := phase{n: n}
	lp, url, pf, err := startFluxFloorPlatform(ctx, env, n)
	if err != nil {
		return p, err
	}
	// Setup, as RegisterControlPlane does for the provider: the tenants' platform
	// namespaces.
	namespaces := make([]string, n)
	for i := range n {
		if namespaces[i], err = fluxNamespace(i); err != nil {
			return p, err
		}
		if err := ensureNS(ctx, pf, namespaces[i]); err != nil {
			return p, err
		}
	}
	// The client discovers each kind's resource on first use: done here, not while
	// measured, as the runtime's clients have by the time they serve.
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &sourcev1.OCIRepositoryList{}, &helmv2.HelmReleaseList{}} {
		if err := pf.List(ctx, l, client.InNamespace(namespaces[0])); err != nil {
			return p, err
		}
	}
	releases, err := watchReadyOf(ctx, helmv2.GroupVersion.WithResource("helmreleases"), lp.Platform.Config)
	if err != nil {
		return p, err
	}

	// A watch is opened a moment after its informer syncs; the Ready times must not
	// wait for it.
	time.Sleep(2 * time.Second)

	start := time.Now()
	var mu sync.Mutex
	created, written := map[string]time.Time{}, map[string]time.Time{}
	if err := parallel(n, concurrency, func(i int) error {
		ns := namespaces[i]
		mu.Lock()
		created["/"+ns+"/"+greeter.ReleaseName] = time.Now()
		mu.Unlock()
		if err := createFloorObjects(ctx, pf, ns, url, fluxKubeconfigSecret, lp.MCPs[i%len(lp.MCPs)].Kubeconfig(), "hello "+cpName(i)); err != nil {
			return err
		}
		mu.Lock()
		written["/"+ns+"/"+greeter.ReleaseName] = time.Now()
		mu.Unlock()
		return nil
	}); err != nil {
		return p, err
	}
	ready, err := releases.waitAll(ctx, n, fluxTimeout(n))
	if err != nil {
		return p, err
	}
	p.total = lastOf(ready).Sub(start)
	p.lat = latencies(created, ready)
	for k, c := range created {
		r.floorToRelease = append(r.floorToRelease, written[k].Sub(c))
		r.floorFlux = append(r.floorFlux, ready[k].Sub(written[k]))
	}
	sortDurations(r.floorToRelease, r.floorFlux)
	return p, nil
}

// floorObjects are what the floor writes for one tenant in its platform namespace
// ns: the OCIRepository and HelmRelease as the greeter writes them in standard mode
// (examples/greeter/provider.go, writeSource and writeRelease), the release installing
// with the kubeconfig in the Secret named secret, and first that Secret when
// kubeconfig is given.
func floorObjects(ns, url, secret string, kubeconfig []byte, message string) ([]client.Object, error) {
	values, err := json.Marshal(map[string]any{"message": message})
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	if kubeconfig != nil {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Data: map[string][]byte{"kubeconfig": kubeconfig}})
	}
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: greeter.SourceName},
		Spec: sourcev1.OCIRepositorySpec{
			URL:       url,
			Reference: &sourcev1.OCIRepositoryRef{Tag: fluxChartVersion},
			Interval:  fluxInterval,
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
				Operation: sourcev1.OCILayerCopy},
		}}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: greeter.ReleaseName},
		Spec: helmv2.HelmReleaseSpec{
			ChartRef:         &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: greeter.SourceName},
			Interval:         fluxInterval,
			KubeConfig:       &fluxmeta.KubeConfigReference{SecretRef: &fluxmeta.SecretKeyReference{Name: secret, Key: "kubeconfig"}},
			ReleaseName:      greeter.ReleaseName,
			TargetNamespace:  greeter.TargetNamespace,
			StorageNamespace: greeter.TargetNamespace,
			Install:          &helmv2.Install{CreateNamespace: true},
			Uninstall:        &helmv2.Uninstall{DeletionPropagation: ptr.To("orphan")},
			Values:           &apiextensionsv1.JSON{Raw: values},
		}}
	return append(objs, repo, hr), nil
}

// createFloorObjects creates floorObjects in order.
func createFloorObjects(ctx context.Context, c client.Client, ns, url, secret string, kubeconfig []byte, message string) error {
	objs, err := floorObjects(ns, url, secret, kubeconfig, message)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

func sortDurations(lists ...[]time.Duration) {
	for _, l := range lists {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	}
}

// runFlux measures every size, the provider first, each side on fresh servers.
func runFlux(ctx context.Context, assets string, sizes []int, opts benchOptions, rep *report) {
	for _, n := range sizes {
		r := fluxRun{n: n}
		sides := []struct {
			run, what string
			measure   func(*localenv.Env) (phase, error)
			into      *phase
			failed    *bool
		}{
			{"flux-provider", "the greeter provider on Flux", func(env *localenv.Env) (phase, error) { return runFluxProvider(ctx, env, n, opts, &r) },
				&r.provider, &r.providerFailed},
			{"flux-floor", "Flux alone", func(env *localenv.Env) (phase, error) { return runFluxFloor(ctx, env, n, &r) },
				&r.floor, &r.floorFailed},
			{"flux-platform-floor", "Flux with the platform's grants", func(env *localenv.Env) (phase, error) { return runFluxPlatformFloor(ctx, env, n, &r) },
				&r.pfloor, &r.pfloorFailed},
		}
		for _, side := range sides {
			err := run(assets, fmt.Sprintf("%s-%d", side.run, n), func(env *localenv.Env) error {
				var err error
				*side.into, err = side.measure(env)
				return err
			})
			if err != nil {
				logf("%s n=%d failed: %v", side.what, n, err)
				rep.failures = append(rep.failures, fmt.Sprintf("%s, %d tenants: %v", side.what, n, err))
				*side.failed = true
				continue
			}
			logf("%s n=%d: %s", side.what, n, side.into.total.Round(time.Millisecond))
		}
		rep.flux = append(rep.flux, r)
	}
}

// machine describes this machine for the report: CPUs and their model, memory, and
// the load average when the run started.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf("; load average at the start %s %s %s (1, 5, 15 min)", f[0], f[1], f[2])
		}
	}
	cpus := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	if model != "" {
		cpus += " (" + model + ")"
	}
	return fmt.Sprintf("%s %s%s%s", runtime.GOOS+"/"+runtime.GOARCH, cpus, mem, load)
}

func p50p95(lat []time.Duration) string {
	return fmt.Sprintf("%s / %s", ms(percentile(lat, .5)), ms(percentile(lat, .95)))
}

func (r *report) fluxSection(w func(string, ...any)) {
	w("## The greeter provider on Flux against Flux alone")
	w("")
	w("Command: `%s`. Machine: %s.", r.command, r.machine)
	w("")
	w("Both sides run on a fresh platform of the same kind, one after the other in this run: platform, onboarding "+
		"and workload API servers and one MCP API server per tenant, the real openmcp-operator v1.3.0 with the local "+
		"platform as cluster provider, Flux's source-controller and helm-controller (default concurrency) on the "+
		"platform cluster and an OCI registry holding the greeter chart (examples/greeter/chart/greeter) at %s. "+
		"The OCIRepository and HelmRelease are the same on both sides (release `greeter` into `greeter-system`, "+
		"Helm's storage there too, createNamespace, Helm's wait for the Deployment on the MCP server's simulated node, "+
		"orphan propagation at uninstall, values `message`, interval %s; the registry serves TLS with the local platform's CA).",
		fluxChartVersion, fluxInterval.Duration)
	w("")
	w("- **greeter provider (runtime + Flux)**: the greeter example (examples/greeter) in standard mode, under " +
		"this runtime with the benchmark's settings; one ControlPlane per tenant registered beforehand, each on its " +
		"own MCP server; the tenants create their Greeters (named like their ControlPlanes, on the onboarding cluster) " +
		"at once. Per tenant, the runtime orders the ControlPlane's access (AccessRequest, which the operator " +
		"routes and the local platform grants with a kubeconfig Secret) and a workload cluster, the provider writes " +
		"the OCIRepository and the HelmRelease naming that Secret, and reports Ready once Flux says the release is " +
		"Ready at the chart version (called again when Flux changes the OCIRepository or a HelmRelease, `WatchesPlatform`; no poll). Time runs from the first creation to " +
		"the last Greeter Ready; per object from its creation to its Ready.")
	w("- **Flux alone (floor)**: no runtime and no access requests. A bare controller-runtime client writes, per " +
		"tenant and with the runtime's work-queue concurrency (8), a Secret with the admin kubeconfig of the tenant's " +
		"MCP server, the OCIRepository and the HelmRelease. Time runs from the first write to the last HelmRelease " +
		"Ready (its observed generation, Ready=True); per object from its tenant's first write.")
	w("- **Flux with the platform's grants (floor with the platform)**: what the runtime must wait for before the " +
		"provider may write, ordered by a bare client with the runtime's concurrency and no worker held while it waits " +
		"(grants seen by watches): per tenant two AccessRequests on the ControlPlane's ClusterRequest (the provider's and " +
		"the worker's access) and a workload ClusterRequest, then the AccessRequest routed to its Cluster once granted; " +
		"once all three are granted, their Secrets read and the OCIRepository and HelmRelease written, the release " +
		"installing with the provider's access Secret (which carries the greeter's rights on the ControlPlane; the worker's and the workload's carry one rule). Time runs from the first request to the last HelmRelease Ready.")
	w("")
	w("| tenants | what | all Ready | p50 to Ready | p95 to Ready | runtime requests per object |")
	w("|---|---|---|---|---|---|")
	for _, f := range r.flux {
		rows := []struct {
			name   string
			p      phase
			failed bool
			reqs   string
		}{
			{"greeter provider (runtime + Flux)", f.provider, f.providerFailed, fmt.Sprintf("%s (%s writes)", perObj(f.n, f.provider.reqs.total()), perObj(f.n, f.provider.reqs.writes()))},
			{"Flux alone (floor)", f.floor, f.floorFailed, "none (3 writes by the client)"},
			{"Flux with the platform's grants (floor with the platform)", f.pfloor, f.pfloorFailed, "none (9 requests by the client: 6 writes, 3 Secret reads)"},
		}
		for _, x := range rows {
			if x.failed {
				w("| %d | %s | failed | | | |", f.n, x.name)
				continue
			}
			w("| %d | %s | %s | %s | %s | %s |", f.n, x.name, secs(x.p.total), ms(percentile(x.p.lat, .5)), ms(percentile(x.p.lat, .95)), x.reqs)
		}
		if !f.providerFailed && !f.floorFailed {
			w("| %d | **ratio provider / floor** | %s | %s | %s | |", f.n,
				ratio(f.provider.total.Seconds(), f.floor.total.Seconds()),
				ratio(percentile(f.provider.lat, .5).Seconds(), percentile(f.floor.lat, .5).Seconds()),
				ratio(percentile(f.provider.lat, .95).Seconds(), percentile(f.floor.lat, .95).Seconds()))
		}
		if !f.providerFailed && !f.pfloorFailed {
			w("| %d | **ratio provider / floor with the platform** | %s | %s | %s | |", f.n,
				ratio(f.provider.total.Seconds(), f.pfloor.total.Seconds()),
				ratio(percentile(f.provider.lat, .5).Seconds(), percentile(f.pfloor.lat, .5).Seconds()),
				ratio(percentile(f.provider.lat, .95).Seconds(), percentile(f.pfloor.lat, .95).Seconds()))
		}
	}
	w("")
	w("Where each tenant's time went, p50 / p95. The provider's HelmRelease is written when the benchmark's watch of " +
		"the platform cluster first sees it, the floor's when its create returned; Ready is when the watch sees it Ready. " +
		"The floor hands Flux all releases within a moment, which then queue in the helm-controller; the provider's " +
		"arrive as the runtime gets each ControlPlane's access granted, spread out, so Flux's part per release is " +
		"shorter there: compare the parts within a column, and the totals across.")
	w("")
	w("| tenants | part | greeter provider | Flux alone | Flux with the platform's grants |")
	w("|---|---|---|---|---|")
	for _, f := range r.flux {
		orFailed := func(failed bool) func([]time.Duration) string {
			return func(lat []time.Duration) string {
				if failed {
					return "failed"
				}
				return p50p95(lat)
			}
		}
		prov, floor, pfloor := orFailed(f.providerFailed), orFailed(f.floorFailed), orFailed(f.pfloorFailed)
		w("| %d | object created (floors: first request) to HelmRelease written | %s | %s | %s |", f.n, prov(f.provToRelease), floor(f.floorToRelease), pfloor(f.pfloorToRelease))
		w("| %d | HelmRelease written to Ready (Flux) | %s | %s | %s |", f.n, prov(f.provFlux), floor(f.floorFlux), pfloor(f.pfloorFlux))
		w("| %d | HelmRelease Ready to object Ready (the provider sees it) | %s | | |", f.n, prov(f.provToReady))
	}
	w("")
	for _, f := range r.flux {
		if f.providerFailed {
			continue
		}
		w("Requests of the runtime per Greeter (%d tenants): %s%s%s. openmcp-operator errors until convergence: %.0f.",
			f.n, byVerb(f.provider.reqs, f.n), readList(f.provider.reqs, f.n), writeList(f.provider.reqs, f.n), f.provider.opErrors)
		w("")
		if f.pfloorFailed {
			continue
		}
		q := f.provider.total.Seconds() / f.pfloor.total.Seconds()
		perGreeter := float64(f.provider.reqs.total()) / float64(f.n)
		w("| target (issue 51), %d tenants | measured | verdict |", f.n)
		w("|---|---|---|")
		w("| the greeter at most 1.2x the floor with the platform's grants (all Ready) | %s (%s against %s) | %s |", ratio(f.provider.total.Seconds(), f.pfloor.total.Seconds()),
			secs(f.provider.total), secs(f.pfloor.total), verdict(q <= 1.2))
		w("| at most 24 requests per Greeter | %.1f | %s |", perGreeter, verdict(perGreeter <= 24))
		w("| no poll of a HelmRelease: the greeter reads its releases when Flux changes them | %s reads of HelmReleases per Greeter | (see examples/greeter: no timed requeue while Flux works) |",
			perObj(f.n, f.provider.reqs.byResource["get helmreleases"]))
		w("")
	}
}
