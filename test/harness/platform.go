package harness

import (
	"context"
	"testing"

	"github.com/kcp-dev/logicalcluster/v3"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/localplatform"
)

// Platform is a local openMCP platform (see localenv.StartPlatform) belonging to a
// test, with admin clients using the harness Scheme.
type Platform struct {
	// The API servers; those not started are nil.
	Platform, Onboarding, Workload, MCP *APIServer
	// KCP is set with PlatformOptions.KCP.
	KCP *KCP
	// Local grants ClusterRequests and AccessRequests on the platform cluster.
	Local *localplatform.Platform
	// ProviderCluster and RuntimeKubeconfig are set with PlatformOptions.Provider.
	ProviderCluster   logicalcluster.Name
	RuntimeKubeconfig []byte
}

// StartPlatform starts a local openMCP platform. t.Cleanup stops it; the test fails
// if the local platform stops before.
func StartPlatform(ctx context.Context, t testing.TB, opts localenv.PlatformOptions) *Platform {
	t.Helper()
	env := NewEnv(t, "platform")
	p, err := env.StartPlatform(ctx, opts)
	if err != nil {
		t.Fatalf("starting the local platform: %v", err)
	}
	out := &Platform{Local: p.Local, ProviderCluster: p.ProviderCluster, RuntimeKubeconfig: p.RuntimeKubeconfig,
		Platform: wrapAPIServer(t, p.Platform), Onboarding: wrapAPIServer(t, p.Onboarding),
		Workload: wrapAPIServer(t, p.Workload), MCP: wrapAPIServer(t, p.MCP),
	}
	if p.KCP != nil {
		out.KCP = &KCP{p.KCP}
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case err := <-p.Failed():
			t.Errorf("%v", err)
		case <-stopped:
		}
	}()
	t.Cleanup(func() { close(stopped) })
	return out
}
