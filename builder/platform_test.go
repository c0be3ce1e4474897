package builder_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

func TestParseDeploymentMode(t *testing.T) {
	for in, want := range map[string]bool{"": false, "standard": false, "platform-service": true, " platform-service ": true} { //nolint:gocritic // the padded key checks that the mode is trimmed
		got, err := builder.ParseDeploymentMode(in)
		if err != nil || got != want {
			t.Errorf("ParseDeploymentMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := builder.ParseDeploymentMode("platform"); err == nil || !strings.Contains(err.Error(), "platform-service") {
		t.Errorf("an unknown mode must be refused naming the valid ones, got %v", err)
	}
}

// A platform service serves the platform cluster only; an onboarding cluster next to it
// is a deployment mistake, refused before anything connects.
func TestPlatformServiceRefusesOnboarding(t *testing.T) {
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	rt, err := builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	err = rt.Start(context.Background(), builder.Options{Platform: unreachable, Onboarding: unreachable, PlatformService: true})
	if err == nil || !strings.Contains(err.Error(), "onboarding") {
		t.Fatalf("Start = %v, want a refusal naming the onboarding cluster", err)
	}
}
