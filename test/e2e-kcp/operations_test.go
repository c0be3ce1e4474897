package e2ekcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestOperations runs the widget provider the way a platform runs it: two replicas
// of the process with leader election, serving standard mode (an onboarding cluster
// with one ControlPlane) and kcp mode (two tenant workspaces) at once. It checks what
// operators and tenants rely on: probes, one leader per mode, events in the tenant's
// own cluster, the metrics endpoint, failover after the leader is killed, and that no
// credential ever reaches a log line or an event.
func TestOperations(t *testing.T) {
	ctx := t.Context()
	captureLogs(t) // the in-process local platform's log

	widgetCRD, configCRD, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	const tenantsNS = "tenants"
	// The real openmcp-operator schedules and routes; the local platform grants.
	p := harness.StartPlatform(ctx, t, localenv.PlatformOptions{
		Clusters:      []string{harness.PurposeOnboarding, harness.PurposeWorkload, harness.PurposeMCP},
		CRDs:          map[string][]*apiextensionsv1.CustomResourceDefinition{harness.PurposePlatform: {configCRD}, harness.PurposeOnboarding: {widgetCRD}},
		ControlPlanes: []types.NamespacedName{{Namespace: tenantsNS, Name: "alpha"}},
		KCP:           true,
	})
	k, platform, onboardingSrv := p.KCP, p.Platform, p.Onboarding
	scheme := spScheme(t)
	pf := harness.NewClient(t, platform.Config, scheme)
	ob := harness.NewClient(t, onboardingSrv.Config, scheme)
	wl := harness.NewClient(t, p.Workload.Config, scheme)
	if err := ob.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantsNS}}); err != nil {
		t.Fatal(err)
	}

	k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), "provider")
	harness.ApplyYAML(ctx, t, k.ClientFor(t, logicalcluster.NewPath(providerWS)), "../../config/kcp/runtime-rbac.yaml")
	kcpKubeconfig := serviceAccountKubeconfig(ctx, t, k, providerWS, "kcp-serviceprovider", "runtime")

	dir := t.TempDir()
	platformKubeconfig, onboardingKubeconfig := filepath.Join(dir, "platform.kubeconfig"), filepath.Join(dir, "onboarding.kubeconfig")
	for path, kc := range map[string][]byte{platformKubeconfig: platform.Kubeconfig(), onboardingKubeconfig: onboardingSrv.Kubeconfig()} {
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	kcpSpec := &v1alpha1.KCP{ProviderWorkspace: providerWS, KubeconfigSecret: v1alpha1.SecretReference{Name: kcpSecretName, Namespace: kcpSecretNS}}
	setConfig := func(t *testing.T, greeting string, poke string) {
		t.Helper()
		pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: spName}}
		if _, err := controllerutil.CreateOrUpdate(ctx, pf, pc, func() error {
			pc.Spec.Greeting, pc.Spec.KCP = greeting, kcpSpec
			// An annotation change wakes the kcp supervisor without touching the spec.
			pc.Annotations = map[string]string{"test/poke": poke}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	a := startReplica(t, "a", platformKubeconfig, onboardingKubeconfig)
	wantProbe(ctx, t, a, "/readyz", http.StatusOK)
	wantMetric(ctx, t, a, "serviceprovider_manager_leader", labels{"mode": "standard"}, 1)

	t.Run("kcp mode is not ready while spec.kcp cannot be served", func(t *testing.T) {
		setConfig(t, "hello", "1") // names a kubeconfig Secret that does not exist yet
		body := wantProbe(ctx, t, a, "/readyz?verbose", http.StatusInternalServerError)
		if !strings.Contains(body, "[-]kcp failed") || !strings.Contains(body, "[+]onboarding-cache ok") {
			t.Errorf("readyz:\n%s", body)
		}
		wantProbe(ctx, t, a, "/healthz", http.StatusOK)
		waitKCPMode(ctx, t, pf, spName, metav1.ConditionFalse, v1alpha1.ReasonKCPKubeconfigInvalid)

		if err := pf.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: kcpSecretNS, Name: kcpSecretName},
			Data:       map[string][]byte{"kubeconfig": kcpKubeconfig},
		}); err != nil {
			t.Fatal(err)
		}
		setConfig(t, "hello", "2")
		wantProbe(ctx, t, a, "/readyz", http.StatusOK)
		wantMetric(ctx, t, a, "serviceprovider_kcp_active", nil, 1)
		wantMetric(ctx, t, a, "serviceprovider_manager_leader", labels{"mode": "kcp"}, 1)
	})

	// The second replica starts once the first leads both modes.
	b := startReplica(t, "b", platformKubeconfig, onboardingKubeconfig)
	wantProbe(ctx, t, b, "/readyz", http.StatusOK)
	wantMetric(ctx, t, b, "serviceprovider_kcp_active", nil, 1)

	// Tenants: two workspaces (the first with a second, rejected Widget) and one
	// ControlPlane on the onboarding cluster.
	var tenants []tenant
	for i := 1; i <= 2; i++ {
		path, lc := k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), fmt.Sprintf("tenant-%d", i))
		k.CreateAPIBinding(ctx, t, path, spName, logicalcluster.NewPath(providerWS), spName, apiexport.AcceptedClaims(spName))
		tn := tenant{path: path, lc: lc, c: harness.NewClient(t, k.ConfigFor(path), scheme)}
		newWidget(ctx, t, tn.c, "main", "blue")
		tenants = append(tenants, tn)
	}
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	second := client.ObjectKey{Namespace: "default", Name: "second"}
	alpha := client.ObjectKey{Namespace: tenantsNS, Name: "alpha"}
	if err := ob.Create(ctx, &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: alpha.Namespace, Name: alpha.Name}, Spec: widget.WidgetSpec{Color: "blue"}}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		waitReady(ctx, t, tn.c, main)
	}
	newWidget(ctx, t, tenants[0].c, "second", "red")
	waitReason(ctx, t, tenants[0].c, second, v1alpha1.ReasonNotSingleton)
	waitReady(ctx, t, ob, alpha)

	t.Run("one replica leads standard mode, the two share kcp mode's workspaces", func(t *testing.T) {
		ma, mb := scrape(ctx, t, a), scrape(ctx, t, b)
		if n := len(mb["serviceprovider_manager_leader"]); n != 2 {
			t.Errorf("b reports leadership of %d modes, want both", n)
		}
		if n := len(mb.with("serviceprovider_engine_objects", labels{"mode": "standard"})) + len(mb.with("serviceprovider_engine_workspaces_engaged", labels{"mode": "standard"})); n != 0 {
			t.Errorf("standby b reports %d standard-mode object or workspace series; only the leader should", n)
		}
		if got := ma.sum("serviceprovider_manager_leader", labels{"mode": "standard"}); got != 1 {
			t.Errorf("replica a leads standard mode: %v, want 1", got)
		}
		if got := mb.sum("serviceprovider_manager_leader", labels{"mode": "standard"}); got != 0 {
			t.Errorf("replica b leads standard mode: %v, want 0", got)
		}
		if got := ma.sum("serviceprovider_engine_reconciles_total", labels{"mode": "standard"}); got == 0 {
			t.Error("replica a reconciled nothing in standard mode")
		}
		if got := mb.sum("serviceprovider_engine_reconciles_total", labels{"mode": "standard"}); got != 0 {
			t.Errorf("standby b reconciled %v times in standard mode", got)
		}
		// kcp mode: both replicas run it (no leader), and each workspace is served by
		// one of them: exactly one replica writes each tenant's object.
		for _, m := range []metricSet{ma, mb} {
			if got := m.sum("serviceprovider_manager_leader", labels{"mode": "kcp"}); got != 1 {
				t.Errorf("a replica reports kcp leadership %v, want 1 (every replica is active)", got)
			}
		}
		wantMetricSum(ctx, t, []*replica{a, b}, "serviceprovider_kcp_workspaces_owned", nil, float64(len(tenants)))
		wantMetricSum(ctx, t, []*replica{a, b}, "serviceprovider_engine_workspaces_engaged", labels{"mode": "kcp"}, float64(len(tenants)))
		for _, tn := range tenants {
			t.Logf("%s served by replica %s", tn.path, soleWriter(ctx, t, tn, main, ""))
		}
		// The events on the ProviderConfig name the replica that recorded them.
		evs := &eventsv1.EventList{}
		if err := pf.List(ctx, evs, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs.Items {
			if ev.Regarding.Name != spName {
				continue
			}
			n++
			if ev.ReportingInstance != a.name && ev.ReportingInstance != b.name {
				t.Errorf("event %s on the ProviderConfig recorded by %q, want replica a or b", ev.Reason, ev.ReportingInstance)
			}
		}
		if n == 0 {
			t.Error("no event on the ProviderConfig")
		}
		lease := &coordinationv1.Lease{}
		if err := pf.Get(ctx, client.ObjectKey{Namespace: "default", Name: spName + "-standard"}, lease); err != nil {
			t.Fatalf("lease of standard mode: %v", err)
		}
		t.Logf("lease %s held by %s", lease.Name, ptr.Deref(lease.Spec.HolderIdentity, ""))
		if err := pf.Get(ctx, client.ObjectKey{Namespace: "default", Name: spName + "-kcp"}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("a kcp-mode leader lease exists (%v); the replicas share kcp mode instead", err)
		}
	})

	t.Run("readiness covers the virtual workspace", func(t *testing.T) {
		body := wantProbe(ctx, t, a, "/readyz?verbose", http.StatusOK)
		for _, want := range []string{"[+]kcp ok", "[+]onboarding-cache ok"} {
			if !strings.Contains(body, want) {
				t.Errorf("readyz lacks %q:\n%s", want, body)
			}
		}
		if len(k.VirtualWorkspaceURLs(ctx, t, logicalcluster.NewPath(providerWS), spName)) == 0 {
			t.Error("no virtual workspace endpoint: the readiness check had nothing to reach")
		}
	})

	t.Run("events reach the tenant's cluster, on transitions only", func(t *testing.T) {
		tn := tenants[1]
		wantEvents(ctx, t, tn.c, spName, main, "Accepted", "Ready")
		wantEvents(ctx, t, ob, spName, alpha, "Accepted", "Ready")
		wantEvents(ctx, t, tenants[0].c, spName, second, "NotSingleton")
		if reasons := eventReasons(ctx, t, tenants[0].c, second); slices.Contains(reasons, "Accepted") {
			t.Errorf("a rejected object was announced as accepted: %v", reasons)
		}

		// What a tenant sees with kubectl in its workspace.
		out := kubectl(ctx, t, k.ConfigFor(tn.path), "get", "events", "-n", "default")
		t.Logf("kubectl get events in %s:\n%s", tn.path, out)
		for _, want := range []string{"Accepted", "Ready", "widget/main"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get events lacks %q", want)
			}
		}

		// A fan-out reconciles every object again; nothing transitions, so nothing is
		// emitted.
		reasons := eventReasons(ctx, t, tn.c, main)
		before := scrapeAll(ctx, t, a, b)
		setConfig(t, "bonjour", "2")
		for _, tn := range tenants {
			wantConfigMap(ctx, t, wl, tn.lc, "bonjour", "blue")
		}
		wantStandardConfigMap(ctx, t, wl, alpha, "bonjour", "blue")
		after := scrapeAll(ctx, t, a, b)
		for _, mode := range []string{"standard", "kcp"} {
			if r0, r1 := before.sum("serviceprovider_engine_reconciles_total", labels{"mode": mode}), after.sum("serviceprovider_engine_reconciles_total", labels{"mode": mode}); r1 <= r0 {
				t.Errorf("%s mode: reconciles %v -> %v, want more after the ProviderConfig change", mode, r0, r1)
			}
			if e0, e1 := before.sum("serviceprovider_engine_events_total", labels{"mode": mode}), after.sum("serviceprovider_engine_events_total", labels{"mode": mode}); e1 != e0 {
				t.Errorf("%s mode: events %v -> %v across reconciles that changed nothing", mode, e0, e1)
			}
		}
		if again := eventReasons(ctx, t, tn.c, main); !slices.Equal(again, reasons) {
			t.Errorf("events on %s changed across reconciles that changed nothing: %v -> %v", main, reasons, again)
		}
		for i, r := range reasons {
			if slices.Contains(reasons[i+1:], r) {
				t.Errorf("event %s emitted twice on %s: %v", r, main, reasons)
			}
		}

		// Deleting the active object is announced; its successor is accepted.
		harness.DeleteAndWait(ctx, t, tenants[0].c, widgetAt(main))
		waitReady(ctx, t, tenants[0].c, second)
		wantEvents(ctx, t, tenants[0].c, spName, main, "Deleting")
		wantEvents(ctx, t, tenants[0].c, spName, second, "NotSingleton", "Accepted", "Ready")
	})

	t.Run("printer columns show readiness, phase, identity and the kcp workspace", func(t *testing.T) {
		out := kubectl(ctx, t, k.ConfigFor(tenants[1].path), "get", "widgets", "-n", "default")
		t.Logf("kubectl get widgets in %s:\n%s", tenants[1].path, out)
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := []string{"NAME", "READY", "PHASE", "IDENTITY", "AGE"}; !slices.Equal(header, want) {
			t.Errorf("columns %v, want %v", header, want)
		}
		if !strings.Contains(out, tenants[1].lc.String()) || !strings.Contains(out, "True") {
			t.Errorf("the row does not show Ready and the identity %s", tenants[1].lc)
		}
		out = kubectl(ctx, t, platform.Config, "get", "widgetconfigs")
		t.Logf("kubectl get widgetconfigs:\n%s", out)
		header = strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := []string{"NAME", "KCP", "WORKSPACE", "KCP", "MODE", "REASON", "AGE"}; !slices.Equal(header, want) {
			t.Errorf("columns %v, want %v", header, want)
		}
		if !strings.Contains(out, providerWS) || !strings.Contains(out, v1alpha1.ReasonKCPActive) {
			t.Errorf("the row does not show the provider workspace %s and kcp mode Active", providerWS)
		}
	})

	t.Run("the metrics moved", func(t *testing.T) {
		pc := &widget.WidgetConfig{}
		if err := pf.Get(ctx, client.ObjectKey{Name: spName}, pc); err != nil {
			t.Fatal(err)
		}
		// Gauges come from the caches; give them a moment to see the last writes.
		wantMetricSum(ctx, t, []*replica{a, b}, "serviceprovider_engine_objects", labels{"mode": "kcp", "phase": "Ready", "reason": "Ready"}, 2)
		// kcp mode's work is spread over both replicas: its series are summed over
		// them. The process-level ones are replica a's.
		m, mb, both := scrape(ctx, t, a), scrape(ctx, t, b), scrapeAll(ctx, t, a, b)
		for _, c := range []struct {
			name string
			l    labels
			min  float64
			max  float64 // 0: no upper bound
		}{
			{"serviceprovider_engine_reconciles_total", labels{"mode": "kcp", "result": "ready"}, 4, 0},
			{"serviceprovider_engine_reconciles_total", labels{"mode": "kcp", "result": "waiting"}, 1, 0},
			{"serviceprovider_engine_reconciles_total", labels{"mode": "kcp", "result": "released"}, 1, 0},
			{"serviceprovider_engine_reconciles_total", labels{"mode": "standard", "result": "ready"}, 2, 0},
			{"serviceprovider_engine_reconcile_duration_seconds_count", labels{"mode": "kcp"}, 5, 0},
			{"serviceprovider_engine_workspaces_engaged", labels{"mode": "kcp"}, 2, 2},
			{"serviceprovider_engine_workspaces_engaged", labels{"mode": "standard"}, 1, 1},
			{"serviceprovider_engine_objects", labels{"mode": "standard", "phase": "Ready"}, 1, 1},
			{"serviceprovider_engine_singleton_conflicts_total", labels{"mode": "kcp"}, 1, 0},
			{"serviceprovider_engine_events_total", labels{"mode": "kcp", "reason": "Accepted"}, 3, 0},
			{"serviceprovider_engine_events_total", labels{"mode": "kcp", "type": "Warning", "reason": "NotSingleton"}, 1, 0},
			{"serviceprovider_access_grant_duration_seconds_count", labels{"mode": "kcp", "cluster": "workload"}, 1, 0},
			{"serviceprovider_access_grant_duration_seconds_count", labels{"mode": "standard", "cluster": "enduser"}, 1, 0},
			{"serviceprovider_kcp_token_requests_total", labels{"kind": "new", "result": "success"}, 2, 0},
			{"serviceprovider_kcp_apiexport_provisions_total", labels{"result": "success"}, 1, 0},
			{"serviceprovider_kcp_runtime_token_refreshes_total", labels{"result": "success"}, 1, 0},
			{"serviceprovider_kcp_active", nil, 1, 1},
			{"serviceprovider_providerconfig_generation", labels{"mode": "kcp"}, float64(pc.Generation), float64(pc.Generation)},
			{"serviceprovider_providerconfig_generation", labels{"mode": "standard"}, float64(pc.Generation), float64(pc.Generation)},
			{"serviceprovider_providerconfig_valid", labels{"mode": "kcp"}, 1, 1},
		} {
			got := m.sum(c.name, c.l)
			switch {
			case c.name == "serviceprovider_providerconfig_generation" || c.name == "serviceprovider_providerconfig_valid":
				if c.l["mode"] == "kcp" {
					// What a replica's last kcp reconcile saw: a replica that serves no
					// workspace has none.
					got = max(m.sum(c.name, c.l), mb.sum(c.name, c.l))
				}
			case c.l["mode"] == "kcp" || c.name == "serviceprovider_kcp_token_requests_total":
				got = both.sum(c.name, c.l)
			}
			if got < c.min || (c.max > 0 && got > c.max) {
				t.Errorf("%s%v = %v, want [%v, %v]", c.name, c.l, got, c.min, c.max)
			}
		}
		if exp := m.sum("serviceprovider_kcp_runtime_token_expiry_timestamp_seconds", nil); exp < float64(time.Now().Unix()) {
			t.Errorf("runtime token expiry %v is in the past", exp)
		}
		for _, name := range m.names() {
			if strings.HasPrefix(name, "serviceprovider_") {
				for _, l := range m.labelNames(name) {
					if !slices.Contains([]string{"provider", "mode", "result", "phase", "reason", "type", "cluster", "state", "kind", "le"}, l) {
						t.Errorf("%s has label %q outside the bounded set", name, l)
					}
				}
			}
		}
	})

	t.Run("the other replica takes over within the lease time after one is killed", func(t *testing.T) {
		killed := time.Now()
		a.stop(syscall.SIGKILL, 0)
		took := map[string]time.Duration{}
		harness.Eventually(ctx, t, 2*replicaLeaseDuration+10*time.Second, "b serves both modes", func(ctx context.Context) error {
			m, err := tryScrape(ctx, b)
			if err != nil {
				return err
			}
			if _, done := took["standard"]; !done && m.sum("serviceprovider_manager_leader", labels{"mode": "standard"}) == 1 {
				took["standard"] = time.Since(killed)
			}
			if _, done := took["kcp"]; !done && m.sum("serviceprovider_kcp_workspaces_owned", nil) == float64(len(tenants)) {
				took["kcp"] = time.Since(killed)
			}
			if len(took) < 2 {
				return fmt.Errorf("serves %v", took)
			}
			return nil
		})
		// Standard mode: a standby takes the lease once it has seen no renewal for
		// LeaseDuration. It looks every RetryPeriod with client-go's jitter (up to 2.2
		// RetryPeriods): it notices the last renewal up to one look late and the expiry
		// up to one look late, so the bound is LeaseDuration plus two looks.
		// kcp mode: b counts a out once a listing sent LeaseDuration after it first saw
		// a's last renewal still shows it (listings every half RetryPeriod), publishes
		// the view without a and, alone, starts a's workspaces at once.
		limits := map[string]time.Duration{
			"standard": replicaLeaseDuration + 2*22*replicaRetryPeriod/10 + time.Second, // + the scrape
			"kcp":      replicaLeaseDuration + 2*replicaRetryPeriod + time.Second,
		}
		for mode, d := range took {
			t.Logf("%s mode: replica b serves %s after a was killed (lease %s, retry %s)", mode, d.Round(10*time.Millisecond), replicaLeaseDuration, replicaRetryPeriod)
			if d > limits[mode] {
				t.Errorf("%s mode failed over after %s, want within %s", mode, d, limits[mode])
			}
		}
		// And it serves: a change in each mode is reconciled by b.
		harness.Patch(ctx, t, tenants[1].c, main, func(w *widget.Widget) { w.Spec.Color = "yellow" })
		harness.Patch(ctx, t, ob, alpha, func(w *widget.Widget) { w.Spec.Color = "purple" })
		wantConfigMap(ctx, t, wl, tenants[1].lc, "bonjour", "yellow")
		wantStandardConfigMap(ctx, t, wl, alpha, "bonjour", "purple")
		t.Logf("changes in both modes reconciled %s after the kill", time.Since(killed).Round(10*time.Millisecond))
		m := scrape(ctx, t, b)
		for _, mode := range []string{"standard", "kcp"} {
			if m.sum("serviceprovider_engine_reconciles_total", labels{"mode": mode}) == 0 {
				t.Errorf("replica b reconciled nothing in %s mode after taking over", mode)
			}
		}
		wantProbe(ctx, t, b, "/readyz", http.StatusOK)
	})

	t.Run("no token or kubeconfig reaches a log line or an event", func(t *testing.T) {
		needles := secretNeedles(ctx, t, pf, wl, kcpKubeconfig, platform.Kubeconfig(), onboardingSrv.Kubeconfig())
		if len(needles) < 6 {
			t.Fatalf("found only %d secrets to look for; the scenario should have minted more", len(needles))
		}
		var haystacks []haystack
		for _, r := range []*replica{a, b} {
			haystacks = append(haystacks, haystack{"replica " + r.name + " log", r.log(t)})
		}
		for _, tn := range tenants {
			haystacks = append(haystacks, haystack{"events in " + tn.path.String(), eventText(ctx, t, tn.c)})
		}
		haystacks = append(haystacks, haystack{"events on the onboarding cluster", eventText(ctx, t, ob)})
		lines := 0
		for _, h := range haystacks {
			lines += bytes.Count(h.text, []byte("\n"))
			for _, n := range needles {
				if i := bytes.Index(h.text, []byte(n.value)); i >= 0 {
					t.Errorf("%s contains %s", h.name, n.what)
				}
			}
			for _, marker := range []string{"eyJhbGciOi", "client-key-data", "certificate-authority-data", "current-context", "BEGIN RSA PRIVATE KEY", "BEGIN EC PRIVATE KEY", "BEGIN PRIVATE KEY"} {
				if bytes.Contains(h.text, []byte(marker)) {
					t.Errorf("%s contains %q", h.name, marker)
				}
			}
		}
		t.Logf("looked for %d secrets and 7 markers in %d lines of logs and events", len(needles), lines)
	})

	t.Run("every log line of a reconcile names mode, workspace, object and identity", func(t *testing.T) {
		n := 0
		for _, r := range []*replica{a, b} {
			for _, line := range bytes.Split(r.log(t), []byte("\n")) {
				var fields map[string]any
				if !bytes.HasPrefix(line, []byte("{")) || json.Unmarshal(line, &fields) != nil {
					continue // klog's lines, not the runtime's
				}
				if _, ok := fields["reconcileID"]; !ok {
					continue
				}
				n++
				for _, key := range []string{"mode", "workspace", "object", "identity"} {
					if v, ok := fields[key].(string); !ok || v == "" {
						t.Errorf("replica %s: reconcile log line without %s: %s", r.name, key, line)
						break
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("no reconcile log lines: the replicas log at V(2), so reconciles should have logged")
		}
		t.Logf("%d reconcile log lines checked", n)
	})
}

type labels map[string]string

// metricSet is one scrape: series by name, each with its labels and value.
type metricSet map[string][]sample

type sample struct {
	labels labels
	value  float64
}

// sum adds the values of name's series whose labels include want.
func (m metricSet) sum(name string, want labels) float64 {
	total := 0.0
	for _, s := range m.with(name, want) {
		total += s.value
	}
	return total
}

func (m metricSet) names() []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m metricSet) labelNames(name string) []string {
	seen := map[string]bool{}
	for _, s := range m[name] {
		for k := range s.labels {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parseMetrics reads Prometheus' text exposition format.
func parseMetrics(r io.Reader) (metricSet, error) {
	m := metricSet{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		ls := labels{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			j, err := parseLabels(line[i+1:], ls)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			rest = line[i+1+j:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("%q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		m[name] = append(m[name], sample{labels: ls, value: v})
	}
	return m, sc.Err()
}

// parseLabels parses `k="v",...}` into ls and returns how many bytes it read.
func parseLabels(s string, ls labels) (int, error) {
	i := 0
	for {
		if i < len(s) && s[i] == '}' {
			return i + 1, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return 0, errors.New("malformed labels")
		}
		key := strings.TrimLeft(s[i:i+eq], ",")
		i += eq + 2
		var val strings.Builder
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return 0, errors.New("unterminated label value")
		}
		ls[key] = val.String()
		i++ // closing quote
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
}

func tryScrape(ctx context.Context, r *replica) (metricSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("metrics of replica %s: %s: %s", r.name, resp.Status, body)
	}
	return parseMetrics(resp.Body)
}

func scrape(ctx context.Context, t testing.TB, r *replica) metricSet {
	t.Helper()
	m, err := tryScrape(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrapeAll scrapes every replica into one set: sums add up over the replicas.
func scrapeAll(ctx context.Context, t testing.TB, rs ...*replica) metricSet {
	t.Helper()
	all := metricSet{}
	for _, r := range rs {
		for name, samples := range scrape(ctx, t, r) {
			all[name] = append(all[name], samples...)
		}
	}
	return all
}

// with returns name's series whose labels include want.
func (m metricSet) with(name string, want labels) []sample {
	var out []sample
	for _, s := range m[name] {
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// wantMetricSum waits until the sum over the replicas of name's series with labels l
// is want.
func wantMetricSum(ctx context.Context, t testing.TB, rs []*replica, name string, l labels, want float64) {
	t.Helper()
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.name
	}
	harness.Eventually(ctx, t, 2*time.Minute, fmt.Sprintf("replicas %v: %s%v = %v", names, name, l, want), func(ctx context.Context) error {
		got := 0.0
		for _, r := range rs {
			m, err := tryScrape(ctx, r)
			if err != nil {
				return err
			}
			got += m.sum(name, l)
		}
		if got != want {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}

// wantMetric waits until the sum of name's series with labels l is want.
func wantMetric(ctx context.Context, t testing.TB, r *replica, name string, l labels, want float64) {
	t.Helper()
	wantMetricSum(ctx, t, []*replica{r}, name, l, want)
}

// wantProbe waits until the replica's probe path answers code, and returns the body.
func wantProbe(ctx context.Context, t testing.TB, r *replica, path string, code int) string {
	t.Helper()
	var body string
	harness.Eventually(ctx, t, 2*time.Minute, fmt.Sprintf("replica %s: %s answers %d", r.name, path, code), func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.probes+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != code {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
	return body
}

// eventReasons lists the reasons of the events regarding the object, oldest first.
func eventReasons(ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey) []string {
	t.Helper()
	items, err := eventsRegarding(ctx, c, "Widget", key)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range items {
		out = append(out, e.Reason)
	}
	return out
}

// eventsRegarding lists the events regarding the object of kind at key, oldest first
// (a cluster-scoped object's are in namespace default).
func eventsRegarding(ctx context.Context, c client.Client, kind string, key client.ObjectKey) ([]eventsv1.Event, error) {
	ns := key.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == key.Name && e.Regarding.Kind == kind {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].EventTime.Before(&out[j].EventTime) })
	return out, nil
}

// wantEvents waits until the object's events include every reason, all reported by
// the provider of the given name.
func wantEvents(ctx context.Context, t testing.TB, c client.Client, provider string, key client.ObjectKey, reasons ...string) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("events %v on %s", reasons, key), func(ctx context.Context) error {
		items, err := eventsRegarding(ctx, c, "Widget", key)
		if err != nil {
			return err
		}
		var have []string
		for _, e := range items {
			have = append(have, e.Reason)
			if e.ReportingController != "services.open-control-plane.io/"+provider {
				return fmt.Errorf("event %s reported by %q", e.Name, e.ReportingController)
			}
		}
		for _, r := range reasons {
			if !slices.Contains(have, r) {
				return fmt.Errorf("have %v", have)
			}
		}
		return nil
	})
}

// eventText is every event of the cluster, as JSON lines.
func eventText(ctx context.Context, t testing.TB, c client.Client) []byte {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, e := range list.Items {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

type haystack struct {
	name string
	text []byte
}

type needle struct{ what, value string }

// secretNeedles collects every credential of the scenario: the runtime's kcp token,
// the admin credentials the replicas were started with, every access kubeconfig the
// platform granted and every kubeconfig the provider handed a worker (the workload
// ServiceAccount tokens the runtime minted in kcp workspaces among them). For each it
// returns the token or key, and the start of the base64 form a []byte would take in
// a JSON log line.
func secretNeedles(ctx context.Context, t testing.TB, pf, wl client.Client, kubeconfigs ...[]byte) []needle {
	t.Helper()
	var out []needle
	add := func(what string, kc []byte) {
		out = append(out, needle{what + " (kubeconfig as base64)", base64.StdEncoding.EncodeToString(kc)[:48]})
		cfg, err := clientcmd.Load(kc)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for name, ai := range cfg.AuthInfos {
			if ai.Token != "" {
				out = append(out, needle{what + " token of " + name, ai.Token})
				// A JWT's signature alone identifies it even if the token was cut.
				if i := strings.LastIndexByte(ai.Token, '.'); i > 0 && len(ai.Token)-i > 20 {
					out = append(out, needle{what + " token signature of " + name, ai.Token[i+1:]})
				}
			}
			if len(ai.ClientKeyData) > 0 {
				key := string(ai.ClientKeyData)
				lines := strings.Split(strings.TrimSpace(key), "\n")
				if len(lines) > 2 {
					out = append(out, needle{what + " client key of " + name, lines[1]})
				}
				out = append(out, needle{what + " client key (base64) of " + name, base64.StdEncoding.EncodeToString(ai.ClientKeyData)[:48]})
			}
		}
	}
	for i, kc := range kubeconfigs {
		add(fmt.Sprintf("kubeconfig #%d given to the replicas", i), kc)
	}
	for name, c := range map[string]client.Client{"platform": pf, "workload": wl} {
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			if kc := s.Data["kubeconfig"]; len(kc) > 0 {
				add(fmt.Sprintf("%s Secret %s/%s", name, s.Namespace, s.Name), kc)
			}
		}
	}
	return out
}

// kubectl runs the test kubectl against cfg and returns its output.
func kubectl(ctx context.Context, t testing.TB, cfg *rest.Config, args ...string) string {
	t.Helper()
	assets, err := localenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", path}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// wantStandardConfigMap waits for the widget ConfigMap of a standard-mode tenant.
func wantStandardConfigMap(ctx context.Context, t testing.TB, wl client.Client, key client.ObjectKey, greeting, color string) {
	t.Helper()
	ns := cluster.StandardIdentity(key.Namespace, key.Name).TenantNamespace()
	harness.Eventually(ctx, t, 2*time.Minute, "widget ConfigMap of "+key.String(), func(ctx context.Context) error {
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
