package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Platform is a local openMCP platform (see localenv.StartPlatform) belonging to a
// test, with admin clients using the harness Scheme.
type Platform struct {
	// The API servers; those not started are nil.
	Platform, Onboarding, Workload, MCP *APIServer
	// MCPs are the MCP servers (PlatformOptions.MCPClusters), MCPs[i] behind the
	// local platform's target localenv.MCPTargetName(i); MCPs[0] is MCP.
	MCPs []*APIServer
	// KCP is set with PlatformOptions.KCP.
	KCP *KCP
	// Local grants ClusterRequests and AccessRequests on the platform cluster.
	Local *localplatform.Platform
	// ProviderCluster and RuntimeKubeconfig are set with PlatformOptions.Provider.
	ProviderCluster   logicalcluster.Name
	RuntimeKubeconfig []byte
	// Registry is the OCI registry Flux installs charts from, with PlatformOptions.Flux.
	Registry *localenv.Registry

	local *localenv.Platform
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
	out := wrapPlatform(t, p)
	stopped := make(chan struct{})
	go func() {
		select {
		case err := <-p.Failed():
			t.Errorf("%v", err)
		case <-stopped:
		}
	}()
	t.Cleanup(func() { close(stopped) })
	if p.Operator != nil {
		t.Cleanup(func() { noOperatorBackoff(t, p.Operator) })
	}
	return out
}

// wrapPlatform gives a started platform the harness's clients.
func wrapPlatform(t testing.TB, p *localenv.Platform) *Platform {
	out := &Platform{local: p, Local: p.Local, ProviderCluster: p.ProviderCluster, RuntimeKubeconfig: p.RuntimeKubeconfig, Registry: p.Registry,
		Platform: wrapAPIServer(t, p.Platform), Onboarding: wrapAPIServer(t, p.Onboarding),
		Workload: wrapAPIServer(t, p.Workload), MCP: wrapAPIServer(t, p.MCP),
	}
	for i, s := range p.MCPs {
		if i == 0 {
			out.MCPs = append(out.MCPs, out.MCP)
			continue
		}
		mcp := wrapAPIServer(t, s)
		mcp.Purpose = PurposeMCP
		out.MCPs = append(out.MCPs, mcp)
	}
	if p.KCP != nil {
		out.KCP = &KCP{p.KCP}
	}
	return out
}

// PrepareProvider prepares a provider workspace in the platform's kcp, as a platform
// team does for a provider's runtime (localenv.ProviderWorkspace), and returns its
// logical cluster and the runtime's kubeconfig. On a shared platform each test
// prepares its own, under its own workspace and with a Secret of its own name.
func (p *Platform) PrepareProvider(ctx context.Context, t testing.TB, pw localenv.ProviderWorkspace) (logicalcluster.Name, []byte) {
	t.Helper()
	lc, kubeconfig, err := p.local.PrepareProvider(ctx, pw)
	if err != nil {
		t.Fatalf("preparing the provider workspace %s: %v", pw.Path, err)
	}
	return lc, kubeconfig
}

// noOperatorBackoff fails the test when one of the openmcp-operator's controllers
// failed to reconcile a request: each failure puts the request into the controller's
// exponential backoff (up to about 16 minutes), which the runtime's order of requests
// must never cause. A failure about a request deleted meanwhile is only reported: the
// request is gone, nothing waits for its grant.
func noOperatorBackoff(t testing.TB, op *localenv.Operator) {
	t.Helper()
	notes, err := operatorBackoff(op)
	for _, n := range notes {
		t.Log(n)
	}
	if err != nil {
		t.Error(err)
	}
}

// operatorBackoff is noOperatorBackoff's finding: what to report, and an error if a
// request still wanted went into the operator's backoff.
func operatorBackoff(op *localenv.Operator) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var notes []string
	var errs []error
	for _, controller := range []string{"clusterrequest", "accessrequest"} {
		n, err := op.ReconcileErrors(ctx, controller)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n == 0 {
			continue
		}
		logged, err := op.ReconcilerErrors(controller)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var stalled, gone []string
		for _, e := range logged {
			if e.RequestGone() {
				gone = append(gone, e.Line)
			} else {
				stalled = append(stalled, e.Line)
			}
		}
		if len(gone) > 0 {
			notes = append(notes, fmt.Sprintf("the openmcp-operator's %s controller failed %d times on requests deleted while it reconciled them (no grant waited):\n%s",
				controller, len(gone), strings.Join(gone, "\n")))
		}
		if len(stalled) > 0 || int(n) > len(logged) {
			errs = append(errs, fmt.Errorf("the openmcp-operator's %s controller failed %v times (%d logged on requests still wanted): each put a request into its backoff:\n%s",
				controller, n, len(stalled), strings.Join(stalled, "\n")))
		}
	}
	return notes, errors.Join(errs...)
}

// StandardOptions configure StartStandard.
type StandardOptions struct {
	// ConfigCRD is the provider's ProviderConfig, installed on the platform cluster;
	// ServiceCRD its Service API, installed on the onboarding cluster.
	ConfigCRD, ServiceCRD *apiextensionsv1.CustomResourceDefinition
	// TenantNamespace is created on the onboarding cluster; ControlPlanes are
	// registered there.
	TenantNamespace string
	ControlPlanes   []string
	// LocalPlatform configures the local platform (TokenTTL, policies).
	LocalPlatform localplatform.Options
	// ProxyWorkload puts a proxy (Standard.WorkloadProxy) in front of the workload
	// cluster in the access the local platform hands out, so a test can make it
	// unreachable.
	ProxyWorkload bool
	// Scheme is the scheme of the servers' Clients (default: the harness Scheme).
	Scheme *runtime.Scheme
}

// Standard is the platform a standard-mode provider serves: the platform,
// onboarding, workload and MCP clusters, the local platform granting workload and MCP
// clusters, and the provider's CRDs.
type Standard struct {
	*Platform
	// WorkloadProxy is set with StandardOptions.ProxyWorkload.
	WorkloadProxy *localenv.Proxy
}

// StartStandard starts the platform a standard-mode provider serves. t.Cleanup
// stops it.
func StartStandard(ctx context.Context, t testing.TB, opts StandardOptions) *Standard {
	t.Helper()
	s := &Standard{}
	cps := make([]types.NamespacedName, 0, len(opts.ControlPlanes))
	for _, cp := range opts.ControlPlanes {
		cps = append(cps, types.NamespacedName{Namespace: opts.TenantNamespace, Name: cp})
	}
	po := localenv.PlatformOptions{
		Clusters:      []string{PurposeOnboarding, PurposeWorkload, PurposeMCP},
		CRDs:          map[string][]*apiextensionsv1.CustomResourceDefinition{PurposePlatform: {opts.ConfigCRD}, PurposeOnboarding: {opts.ServiceCRD}},
		LocalPlatform: opts.LocalPlatform,
		ControlPlanes: cps,
	}
	if opts.ProxyWorkload {
		po.TargetConfig = func(purpose string, admin *rest.Config) (*rest.Config, error) {
			if purpose != PurposeWorkload {
				return admin, nil
			}
			var proxied *rest.Config
			s.WorkloadProxy, proxied = StartProxy(t, admin)
			return proxied, nil
		}
	}
	s.Platform = StartPlatform(ctx, t, po)
	if opts.Scheme != nil {
		for _, srv := range []*APIServer{s.Platform.Platform, s.Onboarding, s.Workload, s.MCP} {
			srv.Client = NewClient(t, srv.Config, opts.Scheme)
		}
	}
	if err := s.Onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.TenantNamespace}}); err != nil {
		t.Fatalf("creating namespace %s on the onboarding cluster: %v", opts.TenantNamespace, err)
	}
	return s
}
