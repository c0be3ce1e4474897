package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// floorKind is one of the two floors of kcp mode.
type floorKind struct {
	// name names the floor's objects in the workspaces and its platform namespaces,
	// so that both floors run on the same tenants one after the other.
	name string
	// platform: the floor orders the tenant's workload cluster as the runtime does,
	// the AccessRequest only once the ClusterRequest is granted and routed to its
	// Cluster (internal/access, routeAccessRequest), waits for that grant too and
	// reads the access Secret before it writes Ready. Without it the floor orders
	// both requests at once, unrouted, and writes Ready right away.
	platform bool
}

var (
	writesFloor   = floorKind{name: "floor"}
	platformFloor = floorKind{name: "pfloor", platform: true}
)

// floorTenant is what the floor keeps of a tenant between ordering its workload
// cluster and the grant.
type floorTenant struct {
	ws  client.Client
	w   *widget.Widget
	key string
}

// floor issues, with a bare client and the runtime's concurrency, the writes a
// perfect runtime could not avoid for each tenant under this project's own
// requirements, in the runtime's order (report.go's kcp section lists them and why
// each is required). The platform floor also waits for each grant with no worker
// held while it waits (watches of the requests, as the runtime's), and takes the
// next step on one of the same workers: after the ClusterRequest's grant the routed
// AccessRequest, after its grant the access Secret's read and Ready.
func (e *kcpEnv) floor(ctx context.Context, kind floorKind) (phase, error) {
	p := phase{n: len(e.tenants)}
	created, err := e.createWidgets(ctx, kind.name)
	if err != nil {
		return p, err
	}
	cnt := newCounter()
	vw, direct := rest.CopyConfig(e.vwID), rest.CopyConfig(e.directID)
	// kcp's URL: the front-proxy on a sharded kcp, which routes /clusters/<tenant>
	// to the tenant's shard.
	direct.Host = strings.TrimSuffix(e.k.URL(), "/")
	for _, c := range []*rest.Config{vw, direct} {
		c.QPS, c.Burst = 50, 100 // the runtime's defaults
		c.Wrap(cnt.wrap)
	}
	pfCfg := fast(e.platform.Config)
	pfCfg.QPS, pfCfg.Burst = 50, 100
	pfCfg.Wrap(cnt.wrap)
	pf, err := client.New(pfCfg, client.Options{Scheme: benchScheme()})
	if err != nil {
		return p, err
	}
	// One worker pool for every step, as the runtime has one work queue.
	workers := make(chan struct{}, concurrency)
	steps := newSteps(5 * len(e.tenants))
	var (
		mu       sync.Mutex
		done     = map[string]time.Time{}
		tenants  = make([]*floorTenant, len(e.tenants))
		readies  int // objects whose Ready status is written
		allReady = make(chan struct{})
		errs     = steps.errs
	)
	finished := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.After(done[key]) {
			done[key] = now
		}
	}
	// Events are recorded off the reconcile's path, as the runtime's event
	// broadcaster does, by workers of their own; an object is done when its status and
	// its events are written.
	eventSlots := make(chan struct{}, concurrency)
	event := func(t *floorTenant, reason string) {
		w := t.w.DeepCopy()
		steps.on(eventSlots, func() error {
			if err := floorEvent(ctx, t.ws, w, reason); err != nil {
				return err
			}
			finished(t.key)
			return nil
		})
	}
	ready := func(t *floorTenant, secret client.ObjectKey) error {
		if secret.Name != "" {
			if err := pf.Get(ctx, secret, &corev1.Secret{}); err != nil {
				return fmt.Errorf("access Secret: %w", err)
			}
		}
		status := fmt.Appendf(nil, `{"status":{"observedGeneration":1,"phase":"Ready","conditions":[{"type":"Ready","status":"True","reason":"Floor","message":"","lastTransitionTime":%q,"observedGeneration":1}]}}`, time.Now().UTC().Format(time.RFC3339))
		if err := t.ws.Status().Patch(ctx, t.w, client.RawPatch(types.MergePatchType, status)); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		event(t, "Ready")
		finished(t.key)
		mu.Lock()
		if readies++; readies == len(e.tenants) {
			close(allReady)
		}
		mu.Unlock()
		return nil
	}
	onWorker := func(fn func() error) { steps.on(workers, fn) }
	if kind.platform {
		byNS := map[string]int{}
		for i := range e.tenants {
			byNS[floorNamespace(kind, i)] = i
		}
		// once hands each tenant's step to a worker the first time its request is
		// seen granted.
		seen := map[string]bool{}
		once := func(step, ns string, fn func(*floorTenant) error) {
			i, ok := byNS[ns]
			if !ok {
				return
			}
			mu.Lock()
			t, first := tenants[i], !seen[step+"/"+ns]
			if t != nil {
				seen[step+"/"+ns] = true
			}
			mu.Unlock()
			if first && t != nil {
				onWorker(func() error { return fn(t) })
			}
		}
		var pc cache.Cache
		pc, err = watchPlatform(ctx, pfCfg,
			func(cr *clustersv1alpha1.ClusterRequest) {
				once("cluster", cr.Namespace, func(*floorTenant) error { return routedAccessRequest(ctx, pf, pc, kind, cr) })
			},
			func(ar *clustersv1alpha1.AccessRequest) {
				once("access", ar.Namespace, func(t *floorTenant) error {
					return ready(t, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name})
				})
			})
		if err != nil {
			return p, err
		}
	}
	if kind.platform {
		// The operator's client (5 requests a second, burst 10) starts as rested as
		// before the runtime's phase, which starts after the runtime's own start-up
		// of a few seconds: at 10 tenants the burst alone is most of a run.
		time.Sleep(operatorRest)
	}
	before := cnt.snapshot()
	start := time.Now()
	for i := range e.tenants {
		onWorker(func() error {
			return e.floorTenant(ctx, kind, i, vw, direct, pf, event, ready, func(t *floorTenant) {
				mu.Lock()
				tenants[i] = t
				mu.Unlock()
			})
		})
	}
	// The platform floor's last steps are queued by grants: wait for every object.
	timeout := time.NewTimer(convergeTimeout(len(e.tenants)))
	defer timeout.Stop()
	select {
	case err := <-errs:
		return p, err
	case <-allReady:
	case <-timeout.C:
		mu.Lock()
		n := readies
		mu.Unlock()
		return p, fmt.Errorf("%s: %d of %d objects Ready within %s", kind.name, n, len(e.tenants), convergeTimeout(len(e.tenants)))
	case <-ctx.Done():
		return p, ctx.Err()
	}
	if err := steps.wait(); err != nil {
		return p, err
	}
	p.total = lastOf(done).Sub(start)
	// Per tenant, from the phase's start: all tenants' objects existed by then.
	for k := range created {
		created[k] = start
	}
	p.lat = latencies(created, done)
	p.reqs = cnt.snapshot().sub(before)

	// The runtime serves one object per workspace: the floor's goes away, and so do
	// its account and roles, which carry the runtime's label: left behind, they sat in
	// the runtime's watch of its objects in the workspaces, ten per workspace after
	// both floors, and in the memory measured (2026-12-03).
	err = parallel(len(e.tenants), 4*concurrency, func(i int) error {
		tn := e.tenants[i]
		w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: kind.name}}
		if err := tn.c.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			return err
		}
		objs := []client.Object{w,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: kind.name + "-workload"}}}
		for _, role := range []string{kind.name + "-requester", kind.name + "-workload"} {
			objs = append(objs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}})
		}
		for _, obj := range objs {
			if err := client.IgnoreNotFound(tn.c.Delete(ctx, obj)); err != nil {
				return fmt.Errorf("deleting the floor's %T %s: %w", obj, obj.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	return p, e.settleFloorRequests(ctx, kind, e.pf)
}

// steps runs a floor's steps, each on one of the slots of a pool, and keeps their
// errors.
type steps struct {
	wg   sync.WaitGroup
	errs chan error
}

// newSteps returns steps that keep up to capacity errors.
func newSteps(capacity int) *steps { return &steps{errs: make(chan error, capacity)} }

// on runs fn once one of slots is free.
func (s *steps) on(slots chan struct{}, fn func() error) {
	s.wg.Go(func() {
		slots <- struct{}{}
		defer func() { <-slots }()
		if err := fn(); err != nil {
			s.errs <- err
		}
	})
}

// wait waits for every step and returns the first error.
func (s *steps) wait() error {
	s.wg.Wait()
	close(s.errs)
	return <-s.errs
}

// floorTenant issues tenant i's writes up to its workload cluster's order; keep is
// told the tenant's state before the order goes out. Without the platform it then
// writes Ready at once.
func (e *kcpEnv) floorTenant(ctx context.Context, kind floorKind, i int, vw, direct *rest.Config, pf client.Client,
	event func(*floorTenant, string), ready func(*floorTenant, client.ObjectKey) error, keep func(*floorTenant)) error {
	tn := e.tenants[i]
	c := rest.CopyConfig(vw)
	c.Host = e.vwURLOf(tn) + "/clusters/" + tn.lc.String()
	ws, err := client.New(c, client.Options{Scheme: benchScheme()})
	if err != nil {
		return err
	}
	t := &floorTenant{ws: ws, key: tn.lc.String() + "/default/" + kind.name,
		w: &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: kind.name}}}
	if err := ws.Patch(ctx, t.w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["bench/floor"]}}`))); err != nil {
		return fmt.Errorf("finalizer: %w", err)
	}
	event(t, "Accepted")
	labels := map[string]string{apiexport.ManagedByLabel: providerName}
	// The runtime's right to mint the workload's token, then the workload's account
	// and its own rules: two roles, so that neither subject holds the other's rights.
	requester := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: kind.name + "-requester", Labels: labels}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{kind.name + "-workload"}},
		// kcp's workspace content authorizer asks for access to "/" first.
		{NonResourceURLs: []string{"/"}, Verbs: []string{"access"}},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: kind.name + "-workload", Labels: labels}}
	workload := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: kind.name + "-workload", Labels: labels}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{widget.GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
		{NonResourceURLs: []string{"/"}, Verbs: []string{"access"}},
	}}
	for _, obj := range []client.Object{
		requester, floorBinding(requester, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: e.runtimeID}),
		sa,
		workload, floorBinding(workload, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}),
	} {
		if err := ws.Create(ctx, obj); err != nil {
			return fmt.Errorf("%T %s: %w", obj, obj.GetName(), err)
		}
	}
	dc := rest.CopyConfig(direct)
	dc.Host += "/clusters/" + tn.lc.String()
	cs, err := kubernetes.NewForConfig(dc)
	if err != nil {
		return err
	}
	// The binding takes a moment to reach the authorizer: retried like the runtime
	// does, and the retries are counted.
	if err := localenv.Poll(ctx, time.Minute, "floor TokenRequest", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	// One namespace per tenant on the platform, as openMCP's namespace ADR asks.
	ns := floorNamespace(kind, i)
	if err := pf.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("platform namespace: %w", err)
	}
	keep(t)
	flabels := map[string]string{floorLabel: "true"}
	creq := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kind.name, Labels: flabels},
		Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PURPOSE_WORKLOAD}}
	if err := pf.Create(ctx, creq); err != nil {
		return fmt.Errorf("ClusterRequest: %w", err)
	}
	if kind.platform {
		// The grant queues the rest (watchPlatform).
		event(t, "WaitingForWorkloadCluster")
		return nil
	}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kind.name, Labels: flabels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &commonapi.ObjectReference{Namespace: ns, Name: creq.Name},
			Token:      floorToken(),
		}}
	if err := pf.Create(ctx, ar); err != nil {
		return fmt.Errorf("AccessRequest: %w", err)
	}
	event(t, "WaitingForWorkloadCluster")
	return ready(t, client.ObjectKey{})
}

// routedAccessRequest orders the tenant's AccessRequest on its granted ClusterRequest
// as the runtime does: routed to the Cluster, with the labels of its profile and
// cluster provider, which the informer caches of pc answer.
func routedAccessRequest(ctx context.Context, pf client.Client, pc cache.Cache, kind floorKind, cr *clustersv1alpha1.ClusterRequest) error {
	c := &clustersv1alpha1.Cluster{}
	if err := pc.Get(ctx, cr.Status.Cluster.NamespacedName(), c); err != nil {
		return fmt.Errorf("reading the Cluster of ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	profile := &clustersv1alpha1.ClusterProfile{}
	if err := pc.Get(ctx, client.ObjectKey{Name: c.Spec.Profile}, profile); err != nil {
		return fmt.Errorf("reading ClusterProfile %s: %w", c.Spec.Profile, err)
	}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: cr.Namespace, Name: kind.name,
		Labels: map[string]string{floorLabel: "true",
			clustersv1alpha1.ProviderLabel: profile.Spec.ProviderRef.Name, clustersv1alpha1.ProfileLabel: profile.Name}},
		Spec: clustersv1alpha1.AccessRequestSpec{
			ClusterRef: &commonapi.ObjectReference{Namespace: c.Namespace, Name: c.Name},
			Token:      floorToken(),
		}}
	if err := pf.Create(ctx, ar); err != nil {
		return fmt.Errorf("AccessRequest: %w", err)
	}
	return nil
}

// floorToken is the token the floor's AccessRequests ask for.
func floorToken() *clustersv1alpha1.TokenConfig {
	return &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}}}
}

// watchPlatform watches the floor's requests on the platform, and the Clusters and
// profiles they are granted on, until ctx ends, and calls clusterGranted for each
// ClusterRequest granted a Cluster and accessGranted for each AccessRequest granted
// with its Secret (more than once for one request: the caller keeps the first). It
// returns the cache once it has synced.
func watchPlatform(ctx context.Context, cfg *rest.Config, clusterGranted func(*clustersv1alpha1.ClusterRequest), accessGranted func(*clustersv1alpha1.AccessRequest)) (cache.Cache, error) {
	floor := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{floorLabel: "true"})}
	c, err := cache.New(cfg, cache.Options{Scheme: benchScheme(), ByObject: map[client.Object]cache.ByObject{
		&clustersv1alpha1.ClusterRequest{}: floor, &clustersv1alpha1.AccessRequest{}: floor,
	}})
	if err != nil {
		return nil, fmt.Errorf("cache of the floor's requests: %w", err)
	}
	handle := func(obj client.Object, check func(any)) error {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err == nil {
			_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }})
		}
		if err != nil {
			return fmt.Errorf("watch of %T: %w", obj, err)
		}
		return nil
	}
	errs := []error{
		handle(&clustersv1alpha1.ClusterRequest{}, func(o any) {
			if cr, ok := o.(*clustersv1alpha1.ClusterRequest); ok && cr.Status.IsGranted() && cr.Status.Cluster != nil {
				clusterGranted(cr)
			}
		}),
		handle(&clustersv1alpha1.AccessRequest{}, func(o any) {
			if ar, ok := o.(*clustersv1alpha1.AccessRequest); ok && ar.Status.IsGranted() && ar.Status.SecretRef != nil {
				accessGranted(ar)
			}
		}),
		handle(&clustersv1alpha1.Cluster{}, func(any) {}),
		handle(&clustersv1alpha1.ClusterProfile{}, func(any) {}),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watch of the floor's requests did not sync")
	}
	return c, nil
}

// settleFloorRequests lets the local platform finish with the floor's platform
// requests and removes them, so that the next phase starts on an idle platform:
// the writes floor does not wait for grants, and in the first 500-workspace runs the
// platform was still granting the floor's requests, and then carrying their
// finalizers on the shared Cluster, while the runtime was being measured. Not
// measured.
func (e *kcpEnv) settleFloorRequests(ctx context.Context, kind floorKind, pf client.Client) error {
	floor := client.MatchingLabels{floorLabel: "true"}
	start := time.Now()
	if err := localenv.Poll(ctx, 15*time.Minute, "local platform granting the floor's requests", func(ctx context.Context) error {
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := pf.List(ctx, ars, floor); err != nil {
			return err
		}
		for _, ar := range ars.Items {
			if !ar.Status.IsGranted() {
				return fmt.Errorf("AccessRequest %s/%s is %s", ar.Namespace, ar.Name, ar.Status.Phase)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	err := parallel(len(e.tenants), 4*concurrency, func(i int) error {
		ns := floorNamespace(kind, i)
		for _, obj := range []client.Object{&clustersv1alpha1.AccessRequest{}, &clustersv1alpha1.ClusterRequest{}} {
			obj.SetNamespace(ns)
			obj.SetName(kind.name)
			if err := client.IgnoreNotFound(pf.Delete(ctx, obj)); err != nil {
				return fmt.Errorf("deleting the floor's %T in %s: %w", obj, ns, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := localenv.Poll(ctx, 15*time.Minute, "local platform releasing the floor's requests", func(ctx context.Context) error {
		ars, crs := &clustersv1alpha1.AccessRequestList{}, &clustersv1alpha1.ClusterRequestList{}
		if err := pf.List(ctx, ars, floor); err != nil {
			return err
		}
		if err := pf.List(ctx, crs, floor); err != nil {
			return err
		}
		if n := len(ars.Items) + len(crs.Items); n > 0 {
			return fmt.Errorf("%d requests left", n)
		}
		return nil
	}); err != nil {
		return err
	}
	logf("  %s's platform requests granted and released in %s (not measured)", kind.name, time.Since(start).Round(time.Second))
	return nil
}

// operatorRest is the pause before the platform floor: a refill of the operator's
// client burst (10 requests at 5 a second), a little more than the runtime's start-up
// gives it before the runtime's phase.
const operatorRest = 4 * time.Second

// floorLabel marks the floor's platform requests.
const floorLabel = "bench.kcp-serviceprovider/floor"

// floorNamespace is tenant i's namespace on the platform in a floor.
func floorNamespace(kind floorKind, i int) string { return fmt.Sprintf("%s-%d", kind.name, i) }

// floorBinding binds role to one subject.
func floorBinding(role *rbacv1.ClusterRole, subject rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Labels: role.Labels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{subject}}
}

// floorEvent records one of the transition events issue 6 asks for on the tenant's
// object, as the runtime does (events.k8s.io/v1, through the virtual workspace).
func floorEvent(ctx context.Context, ws client.Client, w *widget.Widget, reason string) error {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: w.Namespace, GenerateName: w.Name + "-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "bench/floor", ReportingInstance: "bench",
		Action: reason, Reason: reason, Type: corev1.EventTypeNormal, Note: reason,
		Regarding: corev1.ObjectReference{APIVersion: widget.GroupVersion.String(), Kind: "Widget", Namespace: w.Namespace, Name: w.Name, UID: w.UID},
	}
	if err := ws.Create(ctx, ev); err != nil {
		return fmt.Errorf("event %s: %w", reason, err)
	}
	return nil
}
