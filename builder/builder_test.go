package builder_test

import (
	"strings"
	"testing"

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
