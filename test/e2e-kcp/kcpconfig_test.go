package e2ekcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestBrokenKCPConfig breaks a working spec.kcp in the ways a platform team does (a
// provider workspace that does not exist, a kubeconfig Secret with garbage, a
// kubeconfig whose token kcp refuses) and checks what the team and the tenants see:
// the ProviderConfig's KCPMode condition and events name the cause, kcp mode keeps
// serving existing and new tenants with the configuration that last worked, and a fix
// is applied within seconds. Then a spec.kcp that never worked shows as well.
func TestBrokenKCPConfig(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	harness.LogToTest(t)
	e := startKCPEnv(ctx, t, builder.Options{})
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	good := *e.kcpSpec
	waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPActive)

	tenantWS := func(name string) tenant {
		return e.newTenant(ctx, t, name)
	}
	existing := tenantWS("tenant-existing")
	newWidget(ctx, t, existing.c, "main", "blue")
	waitReady(ctx, t, existing.c, main)

	// servedOnLastGood checks that kcp mode still serves: the existing tenant's change
	// is installed, and a tenant bound now becomes Ready.
	servedOnLastGood := func(t *testing.T, color, newTenant string) {
		t.Helper()
		if !e.rt.KCPActive() {
			t.Fatal("kcp mode stopped")
		}
		harness.Patch(ctx, t, existing.c, main, func(w *widget.Widget) { w.Spec.Color = color })
		wantConfigMap(ctx, t, e.wl, existing.lc, "hello", color)
		w := waitReady(ctx, t, existing.c, main)
		if w.Status.ObservedGeneration != w.Generation {
			t.Errorf("observed generation %d, want %d", w.Status.ObservedGeneration, w.Generation)
		}
		tn := tenantWS(newTenant)
		start := time.Now()
		newWidget(ctx, t, tn.c, "main", color)
		waitReady(ctx, t, tn.c, main)
		t.Logf("MEASURE new tenant's object Ready %s after its creation, with spec.kcp broken", time.Since(start).Round(10*time.Millisecond))
		wantConfigMap(ctx, t, e.wl, tn.lc, "hello", color)
	}

	t.Run("a provider workspace that does not exist", func(t *testing.T) {
		missing := good
		missing.ProviderWorkspace = "root:does-not-exist"
		e.setConfig(ctx, t, "hello", &missing)
		c := waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonProviderWorkspaceInaccessible)
		for _, want := range []string{"serving with the configuration that last worked (workspace " + e.providerWS.String() + ")", "root:does-not-exist"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("message %q does not say %q", c.Message, want)
			}
		}
		wantConfigEvent(ctx, t, e.pf, e.name, corev1.EventTypeWarning, v1alpha1.ReasonProviderWorkspaceInaccessible)
		servedOnLastGood(t, "green", "tenant-new-1")

		fixed := time.Now()
		e.setConfig(ctx, t, "hello", &good)
		waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPActive)
		t.Logf("MEASURE KCPMode Active %s after spec.kcp was set back", time.Since(fixed).Round(10*time.Millisecond))
		wantConfigEvent(ctx, t, e.pf, e.name, corev1.EventTypeNormal, v1alpha1.ReasonKCPActive)
	})

	t.Run("a kubeconfig Secret with garbage, then a token kcp refuses", func(t *testing.T) {
		setSecret(ctx, t, e.pf, e.secret, []byte("this is not a kubeconfig: [\x00"))
		c := waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPKubeconfigInvalid)
		if want := kcpSecretNS + "/" + kcpSecretName; !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name the Secret %s", c.Message, want)
		}
		wantConfigEvent(ctx, t, e.pf, e.name, corev1.EventTypeWarning, v1alpha1.ReasonKCPKubeconfigInvalid)
		servedOnLastGood(t, "orange", "tenant-new-2")

		fresh := serviceAccountKubeconfig(ctx, t, e.k, e.providerWS.String(), "kcp-serviceprovider", "runtime")
		setSecret(ctx, t, e.pf, e.secret, withToken(t, fresh, "not-a-token-kcp-issued"))
		c = waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPCredentialsInvalid)
		if strings.Contains(c.Message, "not-a-token-kcp-issued") {
			t.Errorf("the message quotes the token: %q", c.Message)
		}
		wantConfigEvent(ctx, t, e.pf, e.name, corev1.EventTypeWarning, v1alpha1.ReasonKCPCredentialsInvalid)
		servedOnLastGood(t, "purple", "tenant-new-3")

		// A new valid kubeconfig (a fresh token) is a new configuration: kcp mode
		// switches to it.
		fixed := time.Now()
		setSecret(ctx, t, e.pf, e.secret, fresh)
		waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPActive)
		t.Logf("MEASURE KCPMode Active on a new kubeconfig %s after the Secret was fixed", time.Since(fixed).Round(10*time.Millisecond))
		harness.Patch(ctx, t, existing.c, main, func(w *widget.Widget) { w.Spec.Color = "teal" })
		wantConfigMap(ctx, t, e.wl, existing.lc, "hello", "teal")
	})

	t.Run("a spec.kcp that never worked", func(t *testing.T) {
		e.setConfig(ctx, t, "hello", nil)
		waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionFalse, v1alpha1.ReasonKCPNotConfigured)
		harness.Eventually(ctx, t, time.Minute, "kcp mode stopped", func(context.Context) error {
			if e.rt.KCPActive() {
				return errors.New("still running")
			}
			return nil
		})
		missing := good
		missing.ProviderWorkspace = "root:does-not-exist"
		e.setConfig(ctx, t, "hello", &missing)
		c := waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionFalse, v1alpha1.ReasonProviderWorkspaceInaccessible)
		if !strings.HasPrefix(c.Message, "kcp mode is not running") {
			t.Errorf("message %q", c.Message)
		}
		if e.rt.KCPActive() {
			t.Error("kcp mode runs")
		}

		fixed := time.Now()
		e.setConfig(ctx, t, "hello", &good)
		waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPActive)
		t.Logf("MEASURE KCPMode Active %s after a never-working spec.kcp was fixed (kcp mode started)", time.Since(fixed).Round(10*time.Millisecond))
		harness.Patch(ctx, t, existing.c, main, func(w *widget.Widget) { w.Spec.Color = "gold" })
		wantConfigMap(ctx, t, e.wl, existing.lc, "hello", "gold")
	})
}

// waitKCPMode waits until the ProviderConfig name's KCPMode condition has status and reason
// for its current generation.
func waitKCPMode(ctx context.Context, t testing.TB, pf client.Client, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	harness.Eventually(ctx, t, 2*time.Minute, fmt.Sprintf("KCPMode %s/%s", status, reason), func(ctx context.Context) error {
		pc := &widget.WidgetConfig{}
		if err := pf.Get(ctx, client.ObjectKey{Name: name}, pc); err != nil {
			return err
		}
		got := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionKCPMode)
		switch {
		case got == nil:
			return errors.New("no KCPMode condition")
		case got.Status != status || got.Reason != reason || got.ObservedGeneration != pc.Generation || pc.Status.ObservedGeneration != pc.Generation:
			return fmt.Errorf("KCPMode %s/%s (generation %d of %d): %s", got.Status, got.Reason, got.ObservedGeneration, pc.Generation, got.Message)
		}
		c = *got
		return nil
	})
	return c
}

// wantConfigEvent waits for an event of the type and reason on the ProviderConfig name.
func wantConfigEvent(ctx context.Context, t testing.TB, pf client.Client, name, eventType, reason string) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("%s event %s on the ProviderConfig", eventType, reason), func(ctx context.Context) error {
		items, err := eventsRegarding(ctx, pf, "WidgetConfig", client.ObjectKey{Name: name})
		if err != nil {
			return err
		}
		var have []string
		for _, ev := range items {
			if ev.Type == eventType && ev.Reason == reason {
				return nil
			}
			have = append(have, ev.Type+"/"+ev.Reason)
		}
		return fmt.Errorf("have %v", have)
	})
}

// setSecret replaces the kubeconfig in the Secret at key (the one spec.kcp names).
func setSecret(ctx context.Context, t testing.TB, pf client.Client, key client.ObjectKey, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{}
	if err := pf.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	s.Data["kubeconfig"] = kubeconfig
	if err := pf.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// withToken is kubeconfig with its token replaced.
func withToken(t testing.TB, kubeconfig []byte, token string) []byte {
	t.Helper()
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Token = token
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
