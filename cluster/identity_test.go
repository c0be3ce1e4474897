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

func TestPlatformIdentityNames(t *testing.T) {
	id := cluster.PlatformIdentity("openmcp-system", "eso")
	// SHAKE128("platform:openmcp-system/eso") as UUIDv8, computed independently (Python
	// hashlib.shake_128 with the version and variant bits set): a change here renames
	// every platform-service tenant namespace, so it must be deliberate.
	if got, want := id.TenantNamespace(), "platform--86434211-0a59-8905-8a2e-7f6199f9165b"; got != want {
		t.Fatalf("TenantNamespace() = %q, want %q", got, want)
	}
	if id.String() != "openmcp-system/eso" {
		t.Fatalf("String() = %q", id.String())
	}
	// The namespace is part of the identity: same name, other namespace, other tenant;
	// a cluster-scoped Service object (no namespace) is a third one.
	other := cluster.PlatformIdentity("other", "eso")
	clusterScoped := cluster.PlatformIdentity("", "eso")
	if id.UUID() == other.UUID() || id.UUID() == clusterScoped.UUID() || other.UUID() == clusterScoped.UUID() {
		t.Fatal("platform identities collide across namespaces")
	}
	// Never the namespace of a ControlPlane or a workspace spelling the same text.
	for _, foreign := range []cluster.Identity{
		cluster.StandardIdentity("openmcp-system", "eso"),
		cluster.KCPIdentity("eso"),
		cluster.KCPIdentity("openmcp-system/eso"),
	} {
		if foreign.TenantNamespace() == id.TenantNamespace() {
			t.Fatalf("platform identity collides with %+v", foreign)
		}
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
