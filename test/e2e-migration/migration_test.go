package e2emigration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/test/e2e-migration/backups"
)

const (
	providerName = "backups"
	providerNS   = localenv.DefaultOperatorNamespace
	team         = "team"
	// The images the ServiceProvider names; the kubelet stand-in runs the binaries
	// built for them.
	oldImage = "ghcr.io/example/backups:v1.1.2-opencontrolplane-runtime"
	newImage = "ghcr.io/example/backups:v2.0.0-kcp-serviceprovider"
	// tenants are onboarded under the old binary; newcomers under the new one.
	tenants, newcomers = 20, 2
	replicas           = 2
	// oldLease is where the old binary elects its leader (cmd/backups-ocr).
	oldLease = "services.open-control-plane.io.backups"
)

// Names the old binary chose (cmd/backups-ocr) and this runtime's own.
var (
	oldOnboarding = []string{"backups.backups.e2e.openmcp.cloud--onboarding-init", "backups.backups.e2e.openmcp.cloud--onboarding-run"}
	newOnboarding = []string{"backups--onboarding-run"}
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, providerv1alpha1.AddToScheme, backups.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func TestMain(m *testing.M) { harness.Main(m) }

// TestSwapFromOpenControlPlaneRuntimeAndBack swaps a live ServiceProvider's image, under
// the real openmcp-operator (init Job, rolling Deployment), from the Backup provider on
// opencontrolplane-runtime v1.2.0 (cmd/backups-ocr, velero's conventions) to the same
// provider on this runtime with its migration declaration (cmd/backups), and back:
//   - after the swap no tenant's Backup ever reads Ready=False, every request keeps its
//     UID, no second worker, namespace or request appears, status.resources keeps its
//     own shape, the old Ready reason stays, the old onboarding requests are gone;
//   - newcomers onboard and a deletion leaves nothing behind;
//   - swapped back, the old binary serves every tenant (newcomers included), and what the
//     new runtime left is exactly its onboarding request, which rollback-cleanup removes.
func TestSwapFromOpenControlPlaneRuntimeAndBack(t *testing.T) {
	ctx := t.Context()
	harness.LogToTest(t)
	oldBin, newBin := build(t, "./cmd/backups-ocr"), build(t, "./cmd/backups")
	env := harness.NewEnv(t, "migration")
	var cps []types.NamespacedName
	for i := range tenants + newcomers + 1 {
		cps = append(cps, types.NamespacedName{Namespace: team, Name: fmt.Sprintf("cp-%02d", i)})
	}
	p, err := env.StartPlatform(ctx, localenv.PlatformOptions{
		Clusters:      []string{localenv.PurposeOnboarding, localenv.PurposeWorkload, localenv.PurposeMCP},
		Targets:       []string{localenv.PurposeWorkload, localenv.PurposeOnboarding, localenv.PurposeMCP},
		ControlPlanes: cps,
		Deployments:   &localenv.KubeletOptions{Images: map[string]string{oldImage: oldBin, newImage: newBin}},
		LocalPlatform: localplatform.Options{Logger: testr.New(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	pf := harness.NewClient(t, p.Platform.Config, scheme)
	ob := harness.NewClient(t, p.Onboarding.Config, scheme)
	wl := harness.NewClient(t, p.Workload.Config, scheme)

	// The old binary's lease lives in a namespace named like the pod's, on the
	// onboarding cluster.
	if err := ob.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNS}}); err != nil {
		t.Fatal(err)
	}
	// The old binary, as the platform runs it today; its runCommand carries flags of
	// its kubebuilder main that the new binary must accept.
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: providerName}}
	sp.Spec.Image, sp.Spec.Verbosity = oldImage, "INFO"
	sp.Spec.RunCommand = []string{"run", "--health-probe-bind-address=0", "--enable-http2", "--webhook-cert-path=/tmp/k8s-webhook-server/serving-certs"}
	sp.Spec.Metrics = &providerv1alpha1.MetricsConfiguration{Disabled: true}
	// Two replicas: the operator passes --leader-elect=true, and the old binary elects
	// on its lease on the onboarding cluster, which the new one takes over.
	sp.Spec.RunReplicas = replicas
	if err := pf.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(ctx, t, pf, p.Kubelet, oldImage)
	if err := pf.Create(ctx, &backups.BackupConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: backups.BackupConfigSpec{Bucket: "b1"}}); err != nil {
		t.Fatal(err)
	}
	if err := ob.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}); err != nil {
		t.Fatal(err)
	}
	for i := range tenants {
		createBackup(ctx, t, ob, cps[i].Name, "daily")
	}
	waitServed(ctx, t, ob, wl, cps[:tenants], "daily", "old binary")
	oldHolder := leaseHolder(ctx, t, ob)
	t.Logf("the old binary's lease %s/%s on the onboarding cluster is held by %s", providerNS, oldLease, oldHolder)
	before := platformState(ctx, t, pf)
	workersBefore := workers(ctx, t, wl)
	t.Logf("under the old binary: %d requests, %d tenant namespaces, %d workers", len(before.requests), len(before.namespaces), len(workersBefore))
	for _, name := range oldOnboarding[1:] {
		if _, ok := before.requests["AccessRequest "+providerNS+"/"+name]; !ok {
			t.Fatalf("the old binary's onboarding request %s is missing: %v", name, slices.Sorted(maps.Keys(before.requests)))
		}
	}

	// Swap to the new binary, watching every Backup for a Ready=False.
	flaps := watchReady(ctx, t, p.Onboarding.Config)
	patchImage(ctx, t, pf, newImage)
	waitRolledOut(ctx, t, pf, p.Kubelet, newImage)
	harness.Eventually(ctx, t, 3*time.Minute, "every Backup served by the new runtime (status.identity set)", func(ctx context.Context) error {
		return allBackups(ctx, ob, cps[:tenants], func(b *backups.Backup) error {
			if b.Status.Identity == "" {
				return fmt.Errorf("%s: no status.identity yet", b.Name)
			}
			return readyAs(b, "ReconcileSuccess")
		})
	})
	harness.Eventually(ctx, t, 2*time.Minute, "the old onboarding requests removed", func(ctx context.Context) error {
		now := platformState(ctx, t, pf)
		for _, name := range oldOnboarding {
			for _, kind := range []string{"AccessRequest", "ClusterRequest"} {
				if _, ok := now.requests[kind+" "+providerNS+"/"+name]; ok {
					return fmt.Errorf("%s %s still there", kind, name)
				}
			}
		}
		return nil
	})
	// Only new pods run now: whoever renews the old lease from here on is one of them.
	rolledOut := metav1.NewMicroTime(time.Now())
	harness.Eventually(ctx, t, time.Minute, "a new replica renewing the old binary's lease", func(ctx context.Context) error {
		l := &coordinationv1.Lease{}
		if err := ob.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: oldLease}, l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == oldHolder || l.Spec.RenewTime == nil || !rolledOut.Before(l.Spec.RenewTime) {
			return fmt.Errorf("held by %v, renewed %v", l.Spec.HolderIdentity, l.Spec.RenewTime)
		}
		return nil
	})
	t.Logf("after the swap the old binary's lease is held and renewed by %s", leaseHolder(ctx, t, ob))
	after := platformState(ctx, t, pf)
	t.Logf("after the swap: %d requests (%d before), %d tenant namespaces (%d before), %d workers (%d before)",
		len(after.requests), len(before.requests), len(after.namespaces), len(before.namespaces), len(workers(ctx, t, wl)), len(workersBefore))
	sameUIDs := 0
	for key, uid := range before.requests {
		if strings.Contains(key, oldOnboarding[0]) || strings.Contains(key, oldOnboarding[1]) {
			continue
		}
		if after.requests[key] != uid {
			t.Errorf("%s: UID %s after the swap, %s before", key, after.requests[key], uid)
			continue
		}
		sameUIDs++
	}
	t.Logf("tenant requests with their UID kept: %d", sameUIDs)
	for key := range after.requests {
		if _, ok := before.requests[key]; !ok && !slices.ContainsFunc(newOnboarding, func(n string) bool { return strings.HasSuffix(key, "/"+n) }) {
			t.Errorf("%s appeared with the swap: a second request", key)
		}
	}
	if !maps.Equal(after.namespaces, before.namespaces) {
		t.Errorf("tenant namespaces %v after the swap, %v before", slices.Sorted(maps.Keys(after.namespaces)), slices.Sorted(maps.Keys(before.namespaces)))
	}
	if w := workers(ctx, t, wl); !maps.Equal(w, workersBefore) {
		t.Errorf("workers %v after the swap, %v before: none may be added or replaced", w, workersBefore)
	}
	if err := allBackups(ctx, ob, cps[:tenants], ownResources); err != nil {
		t.Errorf("status.resources after the swap: %v", err)
	}
	if f := flaps(); len(f) > 0 {
		t.Errorf("Ready=False during the swap: %v", f)
	}

	// Newcomers onboard under the new runtime; a deletion leaves nothing behind.
	for _, cp := range cps[tenants : tenants+newcomers] {
		createBackup(ctx, t, ob, cp.Name, "daily")
	}
	waitServed(ctx, t, ob, wl, cps[tenants:tenants+newcomers], "daily", "new runtime")
	deleteAndWaitGone(ctx, t, ob, pf, wl, cps[0])

	// Swap back. The old binary's init runs again, then its run pod replaces the new one.
	patchImage(ctx, t, pf, oldImage)
	waitRolledOut(ctx, t, pf, p.Kubelet, oldImage)
	served := cps[1 : tenants+newcomers]
	for _, cp := range served {
		setSchedule(ctx, t, ob, cp.Name, "hourly")
	}
	waitServed(ctx, t, ob, wl, served, "hourly", "old binary after the swap back")
	createBackup(ctx, t, ob, cps[tenants+newcomers].Name, "weekly")
	waitServed(ctx, t, ob, wl, cps[tenants+newcomers:], "weekly", "old binary, a tenant onboarded after the swap back")

	// What the new runtime left, and the one command that removes it.
	back := platformState(ctx, t, pf)
	var left []string
	for key := range back.requests {
		if slices.ContainsFunc(newOnboarding, func(n string) bool { return strings.HasSuffix(key, "/"+n) }) {
			left = append(left, key)
		}
	}
	slices.Sort(left)
	want := []string{"AccessRequest " + providerNS + "/" + newOnboarding[0], "ClusterRequest " + providerNS + "/" + newOnboarding[0]}
	if !slices.Equal(left, want) {
		t.Errorf("left by the new runtime after the swap back: %v, want exactly %v", left, want)
	}
	t.Logf("left by the new runtime after the swap back: %v", left)
	kubeconfig := filepath.Join(t.TempDir(), "platform.kubeconfig")
	if err := os.WriteFile(kubeconfig, p.Platform.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, newBin, "rollback-cleanup", "--platform-kubeconfig="+kubeconfig, "--namespace="+providerNS).CombinedOutput()
	if err != nil {
		t.Fatalf("rollback-cleanup: %v\n%s", err, out)
	}
	t.Logf("rollback-cleanup:\n%s", out)
	harness.Eventually(ctx, t, time.Minute, "the new runtime's onboarding request gone", func(ctx context.Context) error {
		now := platformState(ctx, t, pf)
		for _, key := range want {
			if _, ok := now.requests[key]; ok {
				return fmt.Errorf("%s still there", key)
			}
		}
		return nil
	})
	waitServed(ctx, t, ob, wl, served, "hourly", "old binary after the cleanup")
	if refused := p.Kubelet.Refused(); len(refused) > 0 {
		t.Errorf("the kubelet refused pods: %v", refused)
	}
}

// build builds a main package of this module.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	start := time.Now()
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	t.Logf("%s built in %s", pkg, time.Since(start).Round(100*time.Millisecond))
	return bin
}

// waitRolledOut waits until the ServiceProvider is Ready at its generation and the
// only pod running is its run Deployment's, of image.
func waitRolledOut(ctx context.Context, t *testing.T, pf client.Client, kubelet *localenv.Kubelet, image string) {
	t.Helper()
	harness.Eventually(ctx, t, 5*time.Minute, "ServiceProvider Ready with "+image, func(ctx context.Context) error {
		sp := &providerv1alpha1.ServiceProvider{}
		if err := pf.Get(ctx, client.ObjectKey{Name: providerName}, sp); err != nil {
			return err
		}
		s := sp.Status.DeploymentStatus
		if ready := meta.FindStatusCondition(s.Conditions, "Ready"); s.Phase != "Ready" || ready == nil || ready.Status != metav1.ConditionTrue || s.ObservedGeneration != sp.Generation {
			return fmt.Errorf("phase %q, conditions %+v, refused %v", s.Phase, s.Conditions, kubelet.Refused())
		}
		if running := kubelet.Running(); len(running) != replicas {
			return fmt.Errorf("pods running: %v, want the run Deployment's %d", running, replicas)
		}
		return nil
	})
}

func patchImage(ctx context.Context, t *testing.T, pf client.Client, image string) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{}
	if err := pf.Get(ctx, client.ObjectKey{Name: providerName}, sp); err != nil {
		t.Fatal(err)
	}
	base := sp.DeepCopy()
	sp.Spec.Image = image
	if err := pf.Patch(ctx, sp, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func createBackup(ctx context.Context, t *testing.T, ob client.Client, name, schedule string) {
	t.Helper()
	if err := ob.Create(ctx, &backups.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name}, Spec: backups.BackupSpec{Schedule: schedule}}); err != nil {
		t.Fatal(err)
	}
}

func setSchedule(ctx context.Context, t *testing.T, ob client.Client, name, schedule string) {
	t.Helper()
	b := &backups.Backup{}
	if err := ob.Get(ctx, client.ObjectKey{Namespace: team, Name: name}, b); err != nil {
		t.Fatal(err)
	}
	base := b.DeepCopyObject().(*backups.Backup)
	b.Spec.Schedule = schedule
	if err := ob.Patch(ctx, b, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// waitServed waits until each Backup is Ready at its generation with the old reason
// (both binaries write ReconcileSuccess) and its schedule is on the workload cluster.
func waitServed(ctx context.Context, t *testing.T, ob, wl client.Client, cps []types.NamespacedName, schedule, by string) {
	t.Helper()
	start := time.Now()
	harness.Eventually(ctx, t, 5*time.Minute, fmt.Sprintf("%d Backups Ready with schedule %s (%s)", len(cps), schedule, by), func(ctx context.Context) error {
		return allBackups(ctx, ob, cps, func(b *backups.Backup) error {
			if err := readyAs(b, "ReconcileSuccess"); err != nil {
				return err
			}
			if err := ownResources(b); err != nil {
				return err
			}
			cm := &corev1.ConfigMap{}
			if err := wl.Get(ctx, client.ObjectKey{Namespace: b.Status.Resources[0].Namespace, Name: backups.ConfigMapName}, cm); err != nil {
				return fmt.Errorf("%s: %w", b.Name, err)
			}
			if cm.Data["schedule"] != schedule {
				return fmt.Errorf("%s: schedule %q on the workload cluster, want %q", b.Name, cm.Data["schedule"], schedule)
			}
			return nil
		})
	})
	t.Logf("%d Backups served by the %s after %s", len(cps), by, time.Since(start).Round(100*time.Millisecond))
}

func allBackups(ctx context.Context, ob client.Client, cps []types.NamespacedName, check func(*backups.Backup) error) error {
	for _, cp := range cps {
		b := &backups.Backup{}
		if err := ob.Get(ctx, cp, b); err != nil {
			return err
		}
		if err := check(b); err != nil {
			return err
		}
	}
	return nil
}

func readyAs(b *backups.Backup, reason string) error {
	c := meta.FindStatusCondition(b.Status.Conditions, rtv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || b.Status.ObservedGeneration != b.Generation {
		return fmt.Errorf("%s: Ready %+v at observed generation %d of %d, want True with reason %s", b.Name, c, b.Status.ObservedGeneration, b.Generation, reason)
	}
	return nil
}

// ownResources: status.resources is the provider's own shape, as the old binary wrote it.
func ownResources(b *backups.Backup) error {
	if len(b.Status.Resources) != 1 || b.Status.Resources[0].Kind != "ConfigMap" || b.Status.Resources[0].Phase != "Ready" || b.Status.Resources[0].Namespace == "" {
		return fmt.Errorf("%s: status.resources %+v, want the provider's one ConfigMap entry with its phase", b.Name, b.Status.Resources)
	}
	return nil
}

// platformState is what the platform holds for the provider: every ClusterRequest and
// AccessRequest with its UID, and the tenant namespaces.
type state struct {
	requests   map[string]types.UID
	namespaces map[string]bool
}

func platformState(ctx context.Context, t *testing.T, pf client.Client) state {
	t.Helper()
	s := state{requests: map[string]types.UID{}, namespaces: map[string]bool{}}
	ars := &clustersv1alpha1.AccessRequestList{}
	crs := &clustersv1alpha1.ClusterRequestList{}
	nss := &corev1.NamespaceList{}
	for _, l := range []client.ObjectList{ars, crs, nss} {
		if err := pf.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, ar := range ars.Items {
		s.requests["AccessRequest "+ar.Namespace+"/"+ar.Name] = ar.UID
	}
	for _, cr := range crs.Items {
		s.requests["ClusterRequest "+cr.Namespace+"/"+cr.Name] = cr.UID
	}
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "mcp--") {
			s.namespaces[ns.Name] = true
		}
	}
	return s
}

// workers are the tenants' ConfigMaps on the workload cluster, by namespace, with UIDs.
func workers(ctx context.Context, t *testing.T, wl client.Client) map[string]types.UID {
	t.Helper()
	cms := &corev1.ConfigMapList{}
	if err := wl.List(ctx, cms, client.MatchingFields{"metadata.name": backups.ConfigMapName}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, cm := range cms.Items {
		out[cm.Namespace] = cm.UID
	}
	return out
}

// watchReady watches the Backups until the test ends and returns what reports every
// Ready=False seen on an object not being deleted.
func watchReady(ctx context.Context, t *testing.T, cfg *rest.Config) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var flaps []string
	list := &backups.BackupList{}
	if err := wc.List(ctx, list, client.InNamespace(team)); err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, &backups.BackupList{}, client.InNamespace(team), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				b, ok := ev.Object.(*backups.Backup)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				rv = b.ResourceVersion
				if c := meta.FindStatusCondition(b.Status.Conditions, rtv1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue && b.DeletionTimestamp.IsZero() {
					mu.Lock()
					flaps = append(flaps, fmt.Sprintf("%s %s: %s", b.Name, c.Reason, c.Message))
					mu.Unlock()
				}
			}
			w.Stop()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(flaps)
	}
}

// deleteAndWaitGone deletes a tenant's Backup under the new runtime and waits until the
// object, its requests and its worker are gone.
func deleteAndWaitGone(ctx context.Context, t *testing.T, ob, pf, wl client.Client, cp types.NamespacedName) {
	t.Helper()
	b := &backups.Backup{}
	if err := ob.Get(ctx, cp, b); err != nil {
		t.Fatal(err)
	}
	ns := b.Status.Resources[0].Namespace
	if err := ob.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(ctx, t, 3*time.Minute, "Backup "+cp.String()+" and everything of its tenant gone", func(ctx context.Context) error {
		if err := ob.Get(ctx, cp, &backups.Backup{}); err == nil {
			return fmt.Errorf("Backup %s still there", cp)
		}
		if _, ok := workers(ctx, t, wl)[ns]; ok {
			return fmt.Errorf("worker of %s still there", cp)
		}
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := pf.List(ctx, ars, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(ars.Items) > 0 {
			return fmt.Errorf("%d AccessRequests left in %s", len(ars.Items), ns)
		}
		return nil
	})
}

// leaseHolder is who holds the old binary's lease on the onboarding cluster; "" when
// nobody does (or it does not exist yet).
func leaseHolder(ctx context.Context, t *testing.T, ob client.Client) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := ob.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: oldLease}, l); err != nil {
		return ""
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
