package echo_test

import (
	"os"
	"regexp"
	"testing"
)

// The seam's promise: a provider writes install logic only. The reference provider is
// what authors copy, so its service code must not touch what the runtime owns.
func TestProviderHoldsNoRuntimeLogic(t *testing.T) {
	src, err := os.ReadFile("provider.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, forbidden := range []string{
		`(?i)finalizer`, `AccessRequest`, `ClusterRequest`, `Status\(\)\.(Patch|Update|Apply)`,
		`ModeFromCtx`, `ModeKCP`, `ModeStandard`, `ModePlatform`, `(?i)logicalcluster`, `KCP\(`, `kcp-dev`,
		`TokenRequest`, `CreateToken`, `(?i)serviceaccounts/token`,
		`Get\([^)]*ProviderConfig`, `List\([^)]*ProviderConfig`, // loading the ProviderConfig
		`builder\.`, `apiexport\.`,
	} {
		if loc := regexp.MustCompile(forbidden).FindIndex(src); loc != nil {
			t.Errorf("provider.go contains %q at byte %d: that is the runtime's job", forbidden, loc[0])
		}
	}
}
