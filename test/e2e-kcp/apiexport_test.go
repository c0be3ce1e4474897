package e2ekcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kcp-dev/logicalcluster/v3"
	"github.com/kcp-dev/multicluster-provider/apiexport"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpwatch"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestAPIExportReconcilesEveryConsumer exports Widget from a provider workspace,
// binds it from two consumer workspaces, creates one Widget in each and runs
// multicluster-runtime controllers on kcp's apiexport provider: one watching Widgets
// the usual way (a source per engaged workspace), one through the runtime's
// kcpwatch.SharedWatch (one handler on the wildcard informer). Each must see every
// workspace under its logical cluster name and read each Widget through that
// workspace's own client; then a third workspace binds after the controllers started
// and a Widget changes, and both must follow.
func TestAPIExportReconcilesEveryConsumer(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	kcp := sharedPlatform(t, 1).KCP
	kcpReady := time.Now()

	root, _ := kcp.OwnWorkspace(ctx, t)
	providerPath, _ := kcp.CreateWorkspace(ctx, t, root, "provider")
	consumerA, clusterA := kcp.CreateWorkspace(ctx, t, root, "consumer-a")
	consumerB, clusterB := kcp.CreateWorkspace(ctx, t, root, "consumer-b")

	// The provider side: schema and export.
	const exportName = "widgets.services.open-control-plane.io"
	arSchema, err := apisv1alpha1.CRDToAPIResourceSchema(widgetCRD(), "v0")
	if err != nil {
		t.Fatalf("converting the Widget CRD: %v", err)
	}
	provider := kcp.ClientFor(t, providerPath)
	if err := provider.Create(ctx, arSchema); err != nil {
		t.Fatalf("creating APIResourceSchema: %v", err)
	}
	export := &apisv1alpha2.APIExport{
		ObjectMeta: metav1.ObjectMeta{Name: exportName},
		Spec: apisv1alpha2.APIExportSpec{
			Resources: []apisv1alpha2.ResourceSchema{{
				Name:    "widgets",
				Group:   widgetGV.Group,
				Schema:  arSchema.Name,
				Storage: apisv1alpha2.ResourceSchemaStorage{CRD: &apisv1alpha2.ResourceSchemaStorageCRD{}},
			}},
		},
	}
	if err := provider.Create(ctx, export); err != nil {
		t.Fatalf("creating APIExport: %v", err)
	}

	// The tenants: bind and create one Widget each, with different namespaces,
	// names and colours, so a mix-up between workspaces shows.
	want := map[multicluster.ClusterName]map[string]string{
		multicluster.ClusterName(clusterA): {"team-a/first": "red"},
		multicluster.ClusterName(clusterB): {"team-b/second": "blue"},
	}
	for _, c := range []struct {
		path                   logicalcluster.Path
		namespace, name, color string
	}{
		{consumerA, "team-a", "first", "red"},
		{consumerB, "team-b", "second", "blue"},
	} {
		kcp.CreateAPIBinding(ctx, t, c.path, "widgets", providerPath, exportName, nil)
		createWidget(ctx, t, kcp, c.path, c.namespace, c.name, c.color)
	}
	if urls := kcp.VirtualWorkspaceURLs(ctx, t, providerPath, exportName); len(urls) != 1 {
		t.Fatalf("virtual workspace URLs = %v, want one (one shard)", urls)
	}
	setUp := time.Now()

	logs := captureLogs(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller logs (tail):\n%s", logs.tail(60))
		}
	})
	cfg := kcp.ConfigFor(providerPath)
	perWorkspace := startWidgetRecorder(ctx, t, cfg, exportName, false)
	shared := startWidgetRecorder(ctx, t, cfg, exportName, true)
	for name, rec := range map[string]*widgetRecorder{"per-workspace watches": perWorkspace, "one shared watch": shared} {
		rec.waitFor(ctx, t, name, want)
	}
	done := time.Now()

	// A workspace bound after the controllers started, and a change in another.
	consumerC, clusterC := kcp.CreateWorkspace(ctx, t, root, "consumer-c")
	kcp.CreateAPIBinding(ctx, t, consumerC, "widgets", providerPath, exportName, nil)
	createWidget(ctx, t, kcp, consumerC, "team-c", "third", "green")
	scheme := harness.Scheme()
	addWidgetToScheme(scheme)
	ca, err := client.New(kcp.ConfigFor(consumerA), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client for %s: %v", consumerA, err)
	}
	first := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "first"}}
	if err := ca.Patch(ctx, first, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"color":"purple"}}`))); err != nil {
		t.Fatalf("changing the Widget in %s: %v", consumerA, err)
	}
	want[multicluster.ClusterName(clusterA)]["team-a/first"] = "purple"
	want[multicluster.ClusterName(clusterC)] = map[string]string{"team-c/third": "green"}
	for name, rec := range map[string]*widgetRecorder{"per-workspace watches": perWorkspace, "one shared watch": shared} {
		rec.waitFor(ctx, t, name+", after a new binding and a change", want)
	}
	t.Logf("timings: kcp start %s, workspaces+export+bindings+widgets %s, until both consumers reconciled %s, total %s",
		kcpReady.Sub(began).Round(100*time.Millisecond), setUp.Sub(kcpReady).Round(100*time.Millisecond),
		done.Sub(setUp).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
}

// widgetRecorder is a multicluster-runtime controller on kcp's apiexport provider that
// records the Widgets it reconciles.
type widgetRecorder struct {
	seen    *seenWidgets
	mgrDone chan error
}

// startWidgetRecorder starts a recorder; with shared, Widgets are watched through
// kcpwatch.SharedWatch instead of a source per workspace. It stops before kcp.
func startWidgetRecorder(ctx context.Context, t *testing.T, cfg *rest.Config, exportName string, shared bool) *widgetRecorder {
	t.Helper()
	scheme := harness.Scheme()
	addWidgetToScheme(scheme)
	var (
		clusters multicluster.Provider
		watch    *kcpwatch.SharedWatch
		err      error
	)
	if shared {
		watch = kcpwatch.NewSharedWatch(&Widget{}, func() client.ObjectList { return &WidgetList{} })
		clusters, err = watch.NewProvider(cfg, exportName, exportName, scheme)
	} else {
		clusters, err = apiexport.New(cfg, exportName, apiexport.Options{Scheme: scheme})
	}
	if err != nil {
		t.Fatalf("creating the apiexport provider: %v", err)
	}
	mgr, err := mcmanager.New(cfg, clusters, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	rec := &widgetRecorder{seen: &seenWidgets{byCluster: map[multicluster.ClusterName]map[string]string{}}, mgrDone: make(chan error, 1)}
	name := "widget-recorder"
	if shared {
		name += "-shared"
	}
	b := mcbuilder.ControllerManagedBy(mgr).Named(name)
	if shared {
		if err := mgr.Add(watch); err != nil {
			t.Fatalf("adding the shared watch: %v", err)
		}
		b = b.WatchesRawSource(watch.Source(func(name multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
			enqueue := func(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], o client.Object) {
				q.Add(mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}})
			}
			return handler.TypedFuncs[client.Object, mcreconcile.Request]{
				CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
					enqueue(q, e.Object)
				},
				UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
					enqueue(q, e.ObjectNew)
				},
				GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
					enqueue(q, e.Object)
				},
			}
		}))
	} else {
		b = b.For(&Widget{})
	}
	err = b.Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			if errors.Is(err, multicluster.ErrClusterNotFound) {
				return reconcile.Result{}, nil // not engaged (yet, or any more)
			}
			return reconcile.Result{}, fmt.Errorf("cluster %s: %w", req.ClusterName, err)
		}
		w := &Widget{}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, w); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		rec.seen.add(req.ClusterName, req.NamespacedName.String(), w.Spec.Color)
		return reconcile.Result{}, nil
	}))
	if err != nil {
		t.Fatalf("building the controller: %v", err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	go func() { rec.mgrDone <- mgr.Start(mgrCtx) }()
	// Stop the manager before kcp (cleanups run last-in first-out).
	t.Cleanup(func() {
		stopMgr()
		if err := <-rec.mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return rec
}

// waitFor polls until the recorder has seen exactly want.
func (r *widgetRecorder) waitFor(ctx context.Context, t *testing.T, name string, want map[multicluster.ClusterName]map[string]string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-r.mgrDone:
			return false, fmt.Errorf("manager stopped: %w", err)
		default:
		}
		return r.seen.equal(want), nil
	})
	if err != nil {
		t.Fatalf("%s: reconciled %v, want %v: %v", name, r.seen.snapshot(), want, err)
	}
}

// createWidget creates a namespace and a Widget in a consumer workspace. The
// binding's resource may take a moment to appear in discovery, so the create is
// retried while the client cannot map the kind yet.
func createWidget(ctx context.Context, t *testing.T, kcp *harness.KCP, ws logicalcluster.Path, namespace, name, color string) {
	t.Helper()
	scheme := harness.Scheme()
	addWidgetToScheme(scheme)
	c, err := client.New(kcp.ConfigFor(ws), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client for %s: %v", ws, err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatalf("creating namespace %s in %s: %v", namespace, ws, err)
	}
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		w := &Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec:       WidgetSpec{Color: color},
		}
		lastErr = c.Create(ctx, w)
		switch {
		case lastErr == nil:
			return true, nil
		case meta.IsNoMatchError(lastErr) || apierrors.IsNotFound(lastErr):
			return false, nil
		default:
			return false, lastErr
		}
	})
	if err != nil {
		t.Fatalf("creating Widget %s/%s in %s: %v (last: %v)", namespace, name, ws, err, lastErr)
	}
}

// seenWidgets records what the controller reconciled: cluster -> namespace/name -> color.
type seenWidgets struct {
	mu        sync.Mutex
	byCluster map[multicluster.ClusterName]map[string]string
}

func (s *seenWidgets) add(cluster multicluster.ClusterName, key, color string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byCluster[cluster] == nil {
		s.byCluster[cluster] = map[string]string{}
	}
	s.byCluster[cluster][key] = color
}

func (s *seenWidgets) snapshot() map[multicluster.ClusterName]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[multicluster.ClusterName]map[string]string, len(s.byCluster))
	for c, m := range s.byCluster {
		out[c] = maps.Clone(m)
	}
	return out
}

func (s *seenWidgets) equal(want map[multicluster.ClusterName]map[string]string) bool {
	got := s.snapshot()
	return maps.EqualFunc(got, want, maps.Equal[map[string]string])
}

// logBuffer keeps controller-runtime's log in memory, printed only when a test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// captureLogs routes controller-runtime's global logger into a buffer for the rest of
// the test.
func captureLogs(t *testing.T) *logBuffer {
	t.Helper()
	l := &logBuffer{}
	harness.LogTo(t, l)
	return l
}

// logRuntimeOnFailure captures the runtime's log for the rest of the test and prints
// its last n lines if the test fails.
func logRuntimeOnFailure(t *testing.T, n int) {
	t.Helper()
	logs := captureLogs(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime log:\n%s", logs.tail(n))
		}
	})
}
