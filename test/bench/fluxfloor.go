package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// The platform floor of the Flux part orders, per tenant, what the greeter's runtime
// must have granted before the provider may write anything: the ControlPlane's access
// for the provider and for its worker (two AccessRequests on the ControlPlane's
// ClusterRequest) and a workload cluster (a ClusterRequest, then an AccessRequest
// routed to its Cluster once granted). Once all three are granted it reads their
// Secrets and writes the OCIRepository and the HelmRelease, which installs with the
// provider's access Secret of the ControlPlane, as the greeter's does. No step holds a
// worker while it waits: grants are seen by watches, as the runtime sees them.
var (
	fluxFloorMCP      = floorKind{name: "pfloor-mcp"}
	fluxFloorWorker   = floorKind{name: "pfloor-worker"}
	fluxFloorWorkload = floorKind{name: "pfloor-workload"}
)

// runFluxPlatformFloor measures Flux with the platform's grants before it, on a
// platform like runFluxProvider's, with the runtime's work-queue concurrency: time
// from the first request to the last HelmRelease Ready.
func runFluxPlatformFloor(ctx context.Context, env *localenv.Env, n int, r *fluxRun) (phase, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := phase{n: n}
	lp, url, pf, err := startFluxFloorPlatform(ctx, env, n)
	if err != nil {
		return p, err
	}
	pfCfg := fast(lp.Platform.Config)
	// Setup, as for the provider: the ControlPlanes, each granted its MCP server.
	if err := parallel(n, concurrency, func(i int) error {
		return lp.Local.RegisterControlPlane(ctx, cpName(i), tenantNamespace, localenv.MCPTargetName(i%len(lp.MCPs)))
	}); err != nil {
		return p, err
	}
	byNS := map[string]int{}
	namespaces := make([]string, n)
	for i := range n {
		if namespaces[i], err = fluxNamespace(i); err != nil {
			return p, err
		}
		byNS[namespaces[i]] = i
	}
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &sourcev1.OCIRepositoryList{}, &helmv2.HelmReleaseList{},
		&clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}} {
		if err := pf.List(ctx, l, client.InNamespace(namespaces[0])); err != nil {
			return p, err
		}
	}
	releases, err := watchReadyOf(ctx, helmv2.GroupVersion.WithResource("helmreleases"), lp.Platform.Config)
	if err != nil {
		return p, err
	}

	workers := make(chan struct{}, concurrency)
	steps := newSteps(4 * n)
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		// secrets are, by tenant, the access Secrets granted so far, by request name.
		secrets          = make([]map[string]string, n)
		created, written = map[string]time.Time{}, map[string]time.Time{}
	)
	onWorker := func(fn func() error) { steps.on(workers, fn) }
	release := func(i int) error {
		ns := namespaces[i]
		mu.Lock()
		granted := secrets[i]
		mu.Unlock()
		for _, name := range granted {
			if err := pf.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); err != nil {
				return fmt.Errorf("access Secret %s/%s: %w", ns, name, err)
			}
		}
		// The provider's access Secret stands in for the floor's own.
		if err := createFloorObjects(ctx, pf, ns, url, granted[fluxFloorMCP.name], nil, "hello "+cpName(i)); err != nil {
			return err
		}
		mu.Lock()
		written["/"+ns+"/"+greeter.ReleaseName] = time.Now()
		mu.Unlock()
		return nil
	}
	var pc cache.Cache
	pc, err = watchPlatform(ctx, pfCfg,
		func(cr *clustersv1alpha1.ClusterRequest) {
			_, ok := byNS[cr.Namespace]
			mu.Lock()
			first := ok && !seen[cr.Namespace]
			seen[cr.Namespace] = true
			mu.Unlock()
			if first {
				onWorker(func() error { return routedAccessRequest(ctx, pf, pc, fluxFloorWorkload, cr) })
			}
		},
		func(ar *clustersv1alpha1.AccessRequest) {
			i, ok := byNS[ar.Namespace]
			if !ok {
				return
			}
			mu.Lock()
			if secrets[i] == nil {
				secrets[i] = map[string]string{}
			}
			_, had := secrets[i][ar.Name]
			secrets[i][ar.Name] = ar.Status.SecretRef.Name
			all := !had && len(secrets[i]) == 3
			mu.Unlock()
			if all {
				onWorker(func() error { return release(i) })
			}
		})
	if err != nil {
		return p, err
	}
	// The operator's client starts as rested as before the provider's phase.
	time.Sleep(operatorRest)

	start := time.Now()
	floorLabels := map[string]string{floorLabel: "true"}
	for i := range n {
		onWorker(func() error {
			ns := namespaces[i]
			mu.Lock()
			created["/"+ns+"/"+greeter.ReleaseName] = time.Now()
			mu.Unlock()
			mcp := &commonapi.ObjectReference{Namespace: ns, Name: cpName(i)}
			// The provider's access is what Helm installs with: the greeter's own rights.
			tokens := map[floorKind]*clustersv1alpha1.TokenConfig{
				fluxFloorMCP:    {Permissions: greeter.MCPPermissions.Rules},
				fluxFloorWorker: floorToken(),
			}
			for _, kind := range []floorKind{fluxFloorMCP, fluxFloorWorker} {
				ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kind.name, Labels: floorLabels},
					Spec: clustersv1alpha1.AccessRequestSpec{RequestRef: mcp, Token: tokens[kind]}}
				if err := pf.Create(ctx, ar); err != nil {
					return fmt.Errorf("AccessRequest %s/%s: %w", ns, kind.name, err)
				}
			}
			cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fluxFloorWorkload.name, Labels: floorLabels},
				Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD}}
			if err := pf.Create(ctx, cr); err != nil {
				return fmt.Errorf("ClusterRequest %s/%s: %w", ns, cr.Name, err)
			}
			return nil
		})
	}
	wait := make(chan struct{})
	var ready map[string]time.Time
	var waitErr error
	go func() {
		defer close(wait)
		ready, waitErr = releases.waitAll(ctx, n, fluxTimeout(n))
	}()
	select {
	case err := <-steps.errs:
		return p, err
	case <-wait:
	}
	if waitErr != nil {
		return p, waitErr
	}
	if err := steps.wait(); err != nil {
		return p, err
	}
	p.total = lastOf(ready).Sub(start)
	p.lat = latencies(created, ready)
	mu.Lock()
	defer mu.Unlock()
	for k, c := range created {
		r.pfloorToRelease = append(r.pfloorToRelease, written[k].Sub(c))
		r.pfloorFlux = append(r.pfloorFlux, ready[k].Sub(written[k]))
	}
	sortDurations(r.pfloorToRelease, r.pfloorFlux)
	return p, nil
}
