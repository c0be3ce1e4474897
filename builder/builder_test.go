package builder_test

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// plainConfig is a ProviderConfig without a spec.kcp section.
type plainConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (c *plainConfig) DeepCopyObject() runtime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// Declaring kcp mode with a ProviderConfig that cannot carry spec.kcp is refused:
// otherwise kcp mode would silently never start.
func TestCompleteRefusesKCPWithoutSpecKCP(t *testing.T) {
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	_, err = builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&plainConfig{}).
		WorkloadCluster(workload.Permissions{}).
		KCP(apiexport.FromCRD("widgets", widgetCRD)).
		Complete(widget.Provider{})
	if err == nil || !strings.Contains(err.Error(), "cannot carry spec.kcp") {
		t.Fatalf("Complete = %v, want a refusal naming spec.kcp", err)
	}
	// The widget's own ProviderConfig carries it.
	if _, err := builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(workload.Permissions{}).
		KCP(apiexport.FromCRD("widgets", widgetCRD)).
		Complete(widget.Provider{}); err != nil {
		t.Fatalf("Complete with spec.kcp: %v", err)
	}
}

// The platform RBAC is exactly what the provider declared, plus in kcp mode the
// Secrets the runtime writes the workspace kubeconfigs into; nothing for a provider
// that declared nothing.
func TestPlatformRulesAreWhatIsDeclared(t *testing.T) {
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	declared := []rbacv1.PolicyRule{{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"get", "create", "delete"}}}
	newRuntime := func(kcp bool, rules ...rbacv1.PolicyRule) *builder.Runtime[*widget.Widget] {
		b := builder.ServiceProvider[*widget.Widget]("widgets", s).
			For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
			WorkloadCluster(workload.Permissions{}).PlatformPermissions(rules...)
		if kcp {
			b = b.KCP(apiexport.FromCRD("widgets", widgetCRD))
		}
		r, err := b.Complete(widget.Provider{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := newRuntime(false, declared...).PlatformRules(); !reflect.DeepEqual(got, declared) {
		t.Errorf("standard mode: rules = %v, want exactly the declared %v", got, declared)
	}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "delete"}}
	want := []rbacv1.PolicyRule{declared[0], secrets}
	if got := newRuntime(true, declared...).PlatformRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("kcp mode: rules = %v, want %v", got, want)
	}
	if got := newRuntime(true).PlatformRules(); got != nil {
		t.Errorf("nothing declared: rules = %v, want none", got)
	}
	_, err = builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		PlatformPermissions(rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}).
		Complete(widget.Provider{})
	if err == nil || !strings.Contains(err.Error(), "non-resource") {
		t.Errorf("Complete with a non-resource rule = %v, want a refusal", err)
	}
}

// A further cluster needs an id of its own and a purpose or spec; the runtime's own
// registrations and a second declaration of an id are refused at Complete.
func TestAdditionalClusterDeclarations(t *testing.T) {
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	declare := func(ids ...string) error {
		b := builder.ServiceProvider[*widget.Widget]("widgets", s).For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{})
		for _, id := range ids {
			b = b.AdditionalCluster(id, builder.AdditionalCluster[*widget.Widget]{Purpose: "backup"})
		}
		_, err := b.Complete(widget.Provider{})
		return err
	}
	if err := declare("backup", "archive"); err != nil {
		t.Errorf("two further clusters: %v", err)
	}
	for _, bad := range [][]string{{"mcp"}, {"workload"}, {"backup", "backup"}, {""}} {
		if err := declare(bad...); err == nil {
			t.Errorf("further clusters %q accepted", bad)
		}
	}
	if _, err := builder.ServiceProvider[*widget.Widget]("widgets", s).For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		AdditionalCluster("backup", builder.AdditionalCluster[*widget.Widget]{}).Complete(widget.Provider{}); err == nil {
		t.Error("a further cluster without purpose or spec accepted")
	}
}
