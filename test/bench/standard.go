package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

const tenantNamespace = "tenants"

// runStandard measures one runtime ("this" or "peer") in standard mode serving n
// Widgets on fresh API servers.
func runStandard(ctx context.Context, env *localenv.Env, which string, n int, opts benchOptions) (phase, error) {
	// Ends the watches of this run before its servers stop: an open watch holds up a
	// kube-apiserver's shutdown.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := phase{n: n}
	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		return p, err
	}
	lp, err := env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters:         []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		CRDs:             map[string][]*apiextensionsv1.CustomResourceDefinition{localenv.PurposePlatform: {configCRD}, localenv.PurposeOnboarding: {widgetCRD}},
		LocalPlatform:    localplatform.Options{MaxConcurrentReconciles: 16},
		StandInScheduler: opts.standIn,
		// The local platform must never be what the runtime waits for.
		ClientQPS: 1000, ClientBurst: 2000,
	})
	if err != nil {
		return p, err
	}
	platform, onboarding := lp.Platform, lp.Onboarding
	ob, err := client.New(fast(onboarding.Config), client.Options{Scheme: benchScheme()})
	if err != nil {
		return p, err
	}
	pf, err := client.New(fast(platform.Config), client.Options{Scheme: benchScheme()})
	if err != nil {
		return p, err
	}
	if err := ensureNS(ctx, ob, tenantNamespace); err != nil {
		return p, err
	}
	// Registrations in parallel race on the target's Cluster object;
	// RegisterControlPlane retries that itself until the request is granted.
	if err := parallel(n, concurrency, func(i int) error {
		return lp.Local.RegisterControlPlane(ctx, cpName(i), tenantNamespace, localenv.PurposeMCP)
	}); err != nil {
		return p, err
	}
	if err := pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{Greeting: "hello"}}); err != nil {
		return p, err
	}
	watcher, err := watchReady(ctx, onboarding.Config)
	if err != nil {
		return p, err
	}

	cnt := newCounter()
	resetPeakRSS(self)
	p.rssBase, _ = rss(self)
	var stop func()
	switch which {
	case "this":
		rt, err := builder.ServiceProvider[*widget.Widget](providerName, benchScheme()).
			For(&widget.Widget{}).
			WithProviderConfig(&widget.WidgetConfig{}).
			WorkloadCluster(workloadPerms).
			MCPPermissions(stdMCPPerms).
			Complete(noop{})
		if err != nil {
			return p, err
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := rt.Start(rctx, builder.Options{
				Platform: platform.Config, Onboarding: onboarding.Config, Namespace: "default",
				RetryInterval: opts.retry, MaxConcurrentReconciles: opts.concurrency,
				ClientQPS: opts.qps, ClientBurst: opts.burst, WrapTransport: cnt.wrap,
			}); err != nil && rctx.Err() == nil {
				logf("runtime stopped: %v", err)
			}
		}()
		stop = func() { cancel(); <-done }
	case "peer":
		stop, err = startPeer(ctx, platform.Config, onboarding.Config, opts, func(c *rest.Config) { c.Wrap(cnt.wrap) })
		if err != nil {
			return p, err
		}
	default:
		return p, fmt.Errorf("unknown runtime %q", which)
	}
	defer stop()
	cnt.quiesce(2*time.Second, time.Minute)
	p.startup = cnt.snapshot()

	before := cnt.snapshot()
	start := time.Now()
	created, err := createTimed(ctx, ob, n, 4*concurrency, func(i int) client.Object {
		return &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: cpName(i)}, Spec: widget.WidgetSpec{Color: "blue"}}
	})
	if err != nil {
		return p, err
	}
	ready, err := watcher.waitAll(ctx, n, convergeTimeout(n))
	if err != nil {
		return p, err
	}
	p.reqs = cnt.snapshot().sub(before)
	p.total = lastOf(ready).Sub(start)
	p.lat = latencies(created, ready)
	_, p.rssPeak = rss(self)
	p.heap = heapMiB()
	p.opErrors = operatorErrors(ctx, lp.Operator)
	s0 := cnt.snapshot()
	time.Sleep(opts.steady) // the measurement window
	p.steady = cnt.snapshot().sub(s0)
	p.window = opts.steady
	if _, peak := rss(self); peak > p.rssPeak {
		p.rssPeak = peak
	}
	return p, nil
}

func cpName(i int) string { return fmt.Sprintf("cp-%d", i) }

// createTimed creates newObj(i) for each i below n, conc at a time, and returns when
// each was created, by "/<namespace>/<name>" (the watchers' keys).
func createTimed(ctx context.Context, c client.Client, n, conc int, newObj func(i int) client.Object) (map[string]time.Time, error) {
	var mu sync.Mutex
	created := map[string]time.Time{}
	err := parallel(n, conc, func(i int) error {
		obj := newObj(i)
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		mu.Lock()
		created["/"+obj.GetNamespace()+"/"+obj.GetName()] = time.Now()
		mu.Unlock()
		return nil
	})
	return created, err
}
