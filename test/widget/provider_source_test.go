package widget_test

import (
	"os"
	"regexp"
	"testing"
)

// The seam's promise: a provider writes install logic only. The test provider's source
// must not touch what the runtime owns.
func TestProviderHoldsNoRuntimeLogic(t *testing.T) {
	src, err := os.ReadFile("provider.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, forbidden := range []string{
		`(?i)finalizer`, `AccessRequest`, `ClusterRequest`, `Status\(\)\.(Patch|Update)`,
		`ModeFromCtx`, `ModeKCP`, `ModeStandard`, `(?i)logicalcluster`, `TokenRequest`,
		`Get\([^)]*WidgetConfig`, // loading the ProviderConfig
	} {
		if loc := regexp.MustCompile(forbidden).FindIndex(src); loc != nil {
			t.Errorf("provider.go contains %q at byte %d: that is the runtime's job", forbidden, loc[0])
		}
	}
}
