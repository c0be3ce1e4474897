package cluster_test

import (
	"context"
	"strings"
	"testing"

	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

func TestStandardTenantNamespaceIsOpenMCPs(t *testing.T) {
	id := cluster.StandardIdentity("default", "test-controlplane")
	// The value openMCP documents for this ControlPlane.
	if got, want := id.TenantNamespace(), "mcp--be2cbc6e-13da-83b4-90ea-c21fccf8022c"; got != want {
		t.Fatalf("TenantNamespace() = %q, want %q", got, want)
	}
	lib, err := libutils.StableMCPNamespace("test-controlplane", "default")
	if err != nil {
		t.Fatal(err)
	}
	if id.TenantNamespace() != lib {
		t.Fatalf("TenantNamespace() = %q, openmcp-operator says %q", id.TenantNamespace(), lib)
	}
}

func TestKCPIdentityNames(t *testing.T) {
	a, b := cluster.KCPIdentity("2abc3def4ghi5jkl"), cluster.KCPIdentity("2abc3def4ghi5jkm")
	if !strings.HasPrefix(a.TenantNamespace(), "kcp--") || len(a.TenantNamespace()) > 63 {
		t.Fatalf("TenantNamespace() = %q", a.TenantNamespace())
	}
	if a.TenantNamespace() == b.TenantNamespace() {
		t.Fatal("two workspaces share a namespace")
	}
	if a.TenantNamespace() != cluster.KCPIdentity("2abc3def4ghi5jkl").TenantNamespace() {
		t.Fatal("namespace is not stable")
	}
	// A workspace never collides with a ControlPlane whose key spells the same text.
	if a.UUID() == cluster.StandardIdentity("", "2abc3def4ghi5jkl").UUID() {
		t.Fatal("kcp and standard identities collide")
	}
	if n := a.StableName(strings.Repeat("x", 80)); len(n) > 63 {
		t.Fatalf("StableName too long: %d", len(n))
	}
}

func TestAccessorsOutsideRuntimeAreZero(t *testing.T) {
	ctx := context.Background()
	if cluster.WorkloadFromCtx(ctx) != nil || cluster.MCPFromCtx(ctx) != nil || cluster.MCPKubeconfigFromCtx(ctx) != nil {
		t.Fatal("accessors must be nil outside a runtime call")
	}
	if !cluster.IdentityFromCtx(ctx).IsZero() || cluster.ModeFromCtx(ctx) != "" {
		t.Fatal("identity and mode must be zero outside a runtime call")
	}
	tenant := &cluster.Tenant{Mode: cluster.ModeKCP, Identity: cluster.KCPIdentity("x"), ProviderConfig: "config"}
	ctx = cluster.WithTenant(ctx, tenant)
	if cluster.ModeFromCtx(ctx) != cluster.ModeKCP || cluster.ProviderConfigFromCtx[string](ctx) != "config" {
		t.Fatal("accessors do not read the tenant")
	}
	if cluster.WorkloadFromCtx(ctx) != nil {
		t.Fatal("workload must be nil when not granted")
	}
}
