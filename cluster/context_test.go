package cluster_test

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// TestEndpointAndConfig: a worker configured by parts gets the workspace's path apart
// from host and port, and a REST config the provider may change without changing the
// runtime's connection.
func TestEndpointAndConfig(t *testing.T) {
	runtimeCfg := &rest.Config{Host: "https://kcp.example.com:6443/clusters/2x8f3k/", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	ctx := cluster.WithTenant(context.Background(), &cluster.Tenant{
		MCP:      &cluster.Access{Config: runtimeCfg},
		Workload: &cluster.Access{Config: &rest.Config{Host: "https://workload.example.com"}},
	})

	ep, err := cluster.TenantFromCtx(ctx).MCP.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	if want := (cluster.Endpoint{URL: runtimeCfg.Host, Host: "kcp.example.com", Port: "6443", Path: "/clusters/2x8f3k", CAData: []byte("ca")}); ep.URL != want.URL || ep.Host != want.Host || ep.Port != want.Port || ep.Path != want.Path || string(ep.CAData) != "ca" {
		t.Errorf("MCP endpoint %+v, want %+v", ep, want)
	}
	wl, err := cluster.TenantFromCtx(ctx).Workload.Endpoint()
	if err != nil || wl.Port != "443" || wl.Path != "" {
		t.Errorf("workload endpoint %+v (%v), want port 443 from the scheme and no path", wl, err)
	}

	cfg := cluster.MCPConfigFromCtx(ctx)
	cfg.Host, cfg.BearerToken = "https://elsewhere", "other"
	if runtimeCfg.Host != "https://kcp.example.com:6443/clusters/2x8f3k/" || runtimeCfg.BearerToken != "t" {
		t.Errorf("changing the provider's copy changed the runtime's config: %s", runtimeCfg.Host)
	}
	if cluster.WorkloadConfigFromCtx(ctx).Host != "https://workload.example.com" {
		t.Errorf("workload config not handed on")
	}
	if cluster.MCPConfigFromCtx(context.Background()) != nil {
		t.Errorf("a config outside a runtime call")
	}
}

// TestDeletionOutsideDelete: a provider's Delete called by its own unit test, without
// the runtime, is told that nothing is reachable rather than crashing on a nil.
func TestDeletionOutsideDelete(t *testing.T) {
	if d := cluster.DeletionFromCtx(context.Background()); d.Orphaned || d.Workload == cluster.Reachable || d.EndUser == cluster.Reachable {
		t.Errorf("deletion outside a runtime call %+v, want the zero Deletion", d)
	}
	ctx := cluster.WithTenant(context.Background(), &cluster.Tenant{Deletion: &cluster.Deletion{EndUser: cluster.Reachable, Workload: cluster.NotGranted}})
	if d := cluster.DeletionFromCtx(ctx); d.EndUser != cluster.Reachable || d.Workload != cluster.NotGranted {
		t.Errorf("deletion %+v", d)
	}
}

// TestLookupDeletion tells CreateOrUpdate from Delete in code both share: the zero
// Deletion alone reads the same as "nothing reachable".
func TestLookupDeletion(t *testing.T) {
	if _, ok := cluster.LookupDeletion(context.Background()); ok {
		t.Error("a deletion outside a runtime call")
	}
	createOrUpdate := cluster.WithTenant(context.Background(), &cluster.Tenant{})
	if _, ok := cluster.LookupDeletion(createOrUpdate); ok {
		t.Error("a deletion in CreateOrUpdate")
	}
	del := cluster.WithTenant(context.Background(), &cluster.Tenant{Deletion: &cluster.Deletion{Workload: cluster.NotGranted}})
	if d, ok := cluster.LookupDeletion(del); !ok || d.Workload != cluster.NotGranted {
		t.Errorf("in Delete: %+v, %v", d, ok)
	}
}

// TestMCPEndpointFromCtx keeps the kcp workspace's path that host and port lose.
func TestMCPEndpointFromCtx(t *testing.T) {
	if _, ok, err := cluster.MCPEndpointFromCtx(context.Background()); ok || err != nil {
		t.Errorf("outside a runtime call: ok %v, err %v", ok, err)
	}
	ctx := cluster.WithTenant(context.Background(), &cluster.Tenant{MCP: &cluster.Access{
		Config: &rest.Config{Host: "https://kcp.example:6443/clusters/2x8c/", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}},
	}})
	e, ok, err := cluster.MCPEndpointFromCtx(ctx)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if e.Host != "kcp.example" || e.Port != "6443" || e.Path != "/clusters/2x8c" || string(e.CAData) != "ca" {
		t.Errorf("endpoint %+v", e)
	}
	if e, err := cluster.EndpointOf(&rest.Config{Host: "https://mcp.example"}); err != nil || e.Port != "443" || e.Path != "" {
		t.Errorf("EndpointOf without port and path: %+v, %v", e, err)
	}
}
