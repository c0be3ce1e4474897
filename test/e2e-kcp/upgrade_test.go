package e2ekcp

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/apichange"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/sharding"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// upgradeTenants is how many tenant workspaces at least store objects during the
// rollout.
const upgradeTenants = 6

// TestOlderReplicaKeepsNewerFields is a rollout of a Service API change in kcp mode,
// with objects stored and tenants writing: a replica of release v1.2.0, whose schema
// has spec.terminal, serves tenants who set it; a replica of v1.1.0, whose schema lacks
// it, joins (an old replica restarting mid-rollout), then serves alone (a rollback of
// the image), then restarts. Throughout, the export stays on v1.2.0's schema, the
// older replica says so on the ProviderConfig (APIReleaseHeld), and no tenant's object
// loses spec.terminal, while the older replica reconciles their changes.
func TestOlderReplicaKeepsNewerFields(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	e, platformKubeconfig := startReplicaPlatform(ctx, t, 1)
	k, scheme, pf, wl := e.k, e.scheme, e.pf, e.wl
	// spec.terminal is harmless without spec.fail: the new field tenants set.
	newer := []string{replicaReleaseEnv + "=v1.2.0"}
	older := []string{replicaReleaseEnv + "=v1.1.0", replicaWithoutEnv + "=terminal"}

	top := t // replicas outlive the subtests that start them
	replicas := map[string]*replica{"new": e.startReplica(t, "new", platformKubeconfig, newer...)}
	wantProbe(ctx, t, replicas["new"], "/readyz", 200)
	provider := harness.NewClient(t, k.ConfigFor(e.providerWS), scheme)
	served := exportSchema(ctx, t, provider, e.name)
	if served.release != "v1.2.0" {
		t.Fatalf("export at release %q, want v1.2.0", served.release)
	}

	main := client.ObjectKey{Namespace: "default", Name: "main"}
	// The older replica must serve some of the tenants once it joins, and the
	// rendezvous hash gives all of six workspaces to one of two replicas once in 32
	// runs: another tenant joins until the hash divides them.
	var tenants []tenant
	divided := func() bool {
		owners := map[string]bool{}
		for _, tn := range tenants {
			owners[sharding.Owner(tn.lc.String(), "new", "old")] = true
		}
		return len(owners) == 2
	}
	for len(tenants) < upgradeTenants || !divided() {
		tn := e.newTenant(ctx, t, fmt.Sprintf("upgrade-%02d", len(tenants)))
		newWidget(ctx, t, tn.c, main.Name, "blue")
		harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Terminal = true })
		tenants = append(tenants, tn)
	}
	eachTenant(t, tenants, func(t *testing.T, tn tenant) { waitReady(ctx, t, tn.c, main) })

	// Every tenant recolors and the replicas serving now reconcile it; spec.terminal
	// must survive each round, and the export must stay where v1.2.0 put it.
	round := func(t *testing.T, color string) {
		t.Helper()
		eachTenant(t, tenants, func(t *testing.T, tn tenant) {
			harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Color = color })
			wantConfigMap(ctx, t, wl, tn.lc, "hello", color)
			if w := waitReady(ctx, t, tn.c, main); !w.Spec.Terminal {
				t.Errorf("%s: spec.terminal lost", tn.path)
			}
		})
		if got := exportSchema(ctx, t, provider, e.name); got != served {
			t.Errorf("export at %+v, want %+v kept", got, served)
		}
	}

	t.Run("an older replica joining serves through the newer schema and says so", func(t *testing.T) {
		replicas["old"] = e.startReplica(top, "old", platformKubeconfig, older...)
		wantProbe(ctx, t, replicas["old"], "/readyz", 200)
		harness.Eventually(ctx, t, time.Minute, "a Warning APIReleaseHeld on the ProviderConfig from the older replica", func(ctx context.Context) error {
			evs, err := eventsRegarding(ctx, pf, "WidgetConfig", client.ObjectKey{Name: e.name})
			if err != nil {
				return err
			}
			for _, e := range evs {
				if e.Reason == v1alpha1.ReasonAPIReleaseHeld && e.Type == "Warning" && e.ReportingInstance == "old" {
					t.Logf("event: %s", e.Note)
					return nil
				}
			}
			return fmt.Errorf("%d events, none of them", len(evs))
		})
		wantEachShares(ctx, t, replicas, len(tenants))
		round(t, "green")
	})

	t.Run("the older replica alone (a rollback) keeps every field", func(t *testing.T) {
		replicas["new"].stop(syscall.SIGKILL, 0)
		delete(replicas, "new")
		wantMetric(ctx, t, replicas["old"], "serviceprovider_kcp_workspaces_owned", nil, float64(len(tenants)))
		round(t, "yellow")
	})

	t.Run("the older replica restarted keeps every field", func(t *testing.T) {
		replicas["old"].stop(syscall.SIGTERM, 30*time.Second)
		replicas["old"] = e.startReplica(top, "old-again", platformKubeconfig, older...)
		wantProbe(ctx, t, replicas["old"], "/readyz", 200)
		if log := replicas["old"].log(t); !bytes.Contains(log, []byte("the APIExport is left at a newer API release")) {
			t.Errorf("the restarted older replica does not log that it left the export")
		}
		round(t, "purple")
	})
}

// servedSchema is where the export serves widgets from, and the release it records.
type servedSchema struct{ schema, release string }

func exportSchema(ctx context.Context, t testing.TB, provider client.Client, name string) servedSchema {
	t.Helper()
	export := &apisv1alpha2.APIExport{}
	if err := provider.Get(ctx, client.ObjectKey{Name: name}, export); err != nil {
		t.Fatal(err)
	}
	for _, r := range export.Spec.Resources {
		if r.Name == "widgets" {
			return servedSchema{schema: r.Schema, release: export.Annotations[apichange.ReleaseAnnotation]}
		}
	}
	t.Fatalf("export %s serves no widgets: %+v", name, export.Spec.Resources)
	return servedSchema{}
}
