package e2estandard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget/widgetbuilder"
)

// secretAnnotation names, on a Widget, a Secret of the provider's namespace it uses.
const secretAnnotation = "e2e.widgets/secret"

// countingProvider is the widget provider, counting its calls per widget.
type countingProvider struct {
	widget.Provider
	mu    sync.Mutex
	calls map[string]int
}

func (p *countingProvider) CreateOrUpdate(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	p.mu.Lock()
	p.calls[w.Name]++
	p.mu.Unlock()
	return p.Provider.CreateOrUpdate(ctx, w)
}

func (p *countingProvider) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[name]
}

// TestReferencedSecrets: a change to a Secret on the platform cluster reconciles
// exactly the widgets that use it, as opencontrolplane-runtime's SecretWatcher did:
// every widget for the pull secret the WidgetConfig names (their copies follow its
// data), and only alpha for the Secret alpha's annotation names.
func TestReferencedSecrets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := startWidgets(ctx, t, "alpha", "beta")
	ob, wl, pf := p.Onboarding.Client, p.Workload.Client, p.Platform.Platform.Client
	const providerNS = "default"
	secret := func(name, value string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: providerNS, Name: name}}
		if err := pf.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			s.Data = map[string][]byte{"value": []byte(value)}
			if err := pf.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			return
		}
		s.Data = map[string][]byte{"value": []byte(value)}
		if err := pf.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	secret("pull", "v1")
	secret("alpha-extra", "v1")
	if err := pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{Greeting: "hello", PullSecret: "pull"}}); err != nil {
		t.Fatal(err)
	}

	counter := &countingProvider{calls: map[string]int{}}
	rt, err := widgetbuilder.New(providerName, scheme(t), widget.MCPPermissions).
		WatchReferences(&corev1.Secret{}, "", func(pc provider.ProviderConfig, w *widget.Widget) []string {
			names := []string{w.Annotations[secretAnnotation]}
			if c, ok := pc.(*widget.WidgetConfig); ok {
				names = append(names, c.Spec.PullSecret)
			}
			return names
		}).
		Complete(counter)
	if err != nil {
		t.Fatal(err)
	}
	harness.Background(ctx, t, "runtime", func(ctx context.Context) error {
		return rt.Start(ctx, builder.Options{Platform: p.Platform.Platform.Config, Onboarding: p.Onboarding.Config, Namespace: providerNS, RetryInterval: time.Second})
	})
	for _, name := range []string{"alpha", "beta"} {
		w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: name}}
		if name == "alpha" {
			w.Annotations = map[string]string{secretAnnotation: "alpha-extra"}
		}
		if err := ob.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		wantReady(ctx, t, ob, client.ObjectKeyFromObject(w))
	}
	pullCopy := func(name, want string) {
		t.Helper()
		ns, _ := libutils.StableMCPNamespace(name, tenantNamespace)
		harness.Eventually(ctx, t, time.Minute, name+"'s copy of the pull secret at "+want, func(ctx context.Context) error {
			s := &corev1.Secret{}
			if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget-pull-secret"}, s); err != nil {
				return err
			}
			if got := string(s.Data["value"]); got != want {
				return fmt.Errorf("value %q", got)
			}
			return nil
		})
	}
	pullCopy("alpha", "v1")
	pullCopy("beta", "v1")

	// alpha's own Secret: alpha is reconciled, beta is not.
	alpha, beta := counter.count("alpha"), counter.count("beta")
	secret("alpha-extra", "v2")
	harness.Eventually(ctx, t, time.Minute, "alpha reconciled after its Secret changed", func(context.Context) error {
		if counter.count("alpha") == alpha {
			return fmt.Errorf("alpha still at %d calls", alpha)
		}
		return nil
	})
	if got := counter.count("beta"); got != beta {
		t.Errorf("beta reconciled (%d calls, %d before) for a Secret it does not use", got, beta)
	}

	// The ProviderConfig's pull secret: every widget, and their copies follow.
	alpha, beta = counter.count("alpha"), counter.count("beta")
	secret("pull", "v2")
	pullCopy("alpha", "v2")
	pullCopy("beta", "v2")
	if counter.count("alpha") == alpha || counter.count("beta") == beta {
		t.Errorf("calls alpha %d→%d, beta %d→%d: want both reconciled", alpha, counter.count("alpha"), beta, counter.count("beta"))
	}
}
