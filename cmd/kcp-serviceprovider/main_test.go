package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoLocalPlatformInTheProduct: the binary a platform deploys links neither the
// servers of the local platform (internal/localenv) nor the stand-in cluster provider
// (internal/localplatform); only cmd/kcp-serviceprovider-local, which asks for them,
// does.
func TestNoLocalPlatformInTheProduct(t *testing.T) {
	for pkg, want := range map[string]bool{".": false, "../kcp-serviceprovider-local": true} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dev := range []string{"/internal/localenv", "/internal/localplatform"} {
			if got := strings.Contains(string(out), "kcp-serviceprovider"+dev+"\n"); got != want {
				t.Errorf("%s links %s: %v, want %v", pkg, dev, got, want)
			}
		}
	}
}
