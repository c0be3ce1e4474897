package config

import (
	"strings"
	"testing"
)

// The export name is filled in exactly once, where the virtual workspace is granted.
func TestKCPRuntimeRBAC(t *testing.T) {
	if strings.Count(kcpRuntimeRBAC, kcpRuntimeRBACExport) != 1 {
		t.Fatalf("kcp/runtime-rbac.yaml must name the export once as %s", kcpRuntimeRBACExport)
	}
	got := string(KCPRuntimeRBAC("echo.services.open-control-plane.io"))
	if !strings.Contains(got, `resourceNames: ["echo.services.open-control-plane.io"]`) || strings.Contains(got, kcpRuntimeRBACExport) {
		t.Fatalf("export name not filled in:\n%s", got)
	}
}
