package builder

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/ops"
	"github.com/openmcp-project/kcp-serviceprovider/platformservice"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// Deployment modes, as a provider binary accepts them in a --mode flag or in the
// environment variable DeploymentModeEnv. The mode is chosen by whoever deploys the
// image (a ServiceProvider or a PlatformService resource), never by provider code.
const (
	// DeploymentModeEnv is the environment variable naming the deployment mode; a
	// PlatformService sets it through spec.env.
	DeploymentModeEnv = "OPENMCP_DEPLOYMENT_MODE"
	// DeploymentModeStandard serves tenants' ControlPlanes (and kcp workspaces when the
	// ProviderConfig says so): the image deployed as a ServiceProvider.
	DeploymentModeStandard = "standard"
	// DeploymentModePlatformService serves the platform cluster itself: the image
	// deployed as a PlatformService (see package platformservice).
	DeploymentModePlatformService = "platform-service"
)

// ParseDeploymentMode turns a --mode flag or DeploymentModeEnv value into
// Options.PlatformService. Empty means standard.
func ParseDeploymentMode(mode string) (platformService bool, err error) {
	switch strings.TrimSpace(mode) {
	case "", DeploymentModeStandard:
		return false, nil
	case DeploymentModePlatformService:
		return true, nil
	default:
		return false, fmt.Errorf("unknown deployment mode %q: want %q or %q", mode, DeploymentModeStandard, DeploymentModePlatformService)
	}
}

// startPlatformService runs platform-service mode until ctx ends. It replaces the
// other modes: a platform service serves the platform cluster only, so an onboarding
// cluster is a configuration mistake, and kcp mode does not start whatever the
// ProviderConfig says.
func (r *Runtime[T]) startPlatformService(ctx context.Context, opts Options) error {
	if opts.Onboarding != nil {
		return errors.New("platform-service mode serves the platform cluster only: do not configure an onboarding cluster")
	}
	mgr, err := r.platformServiceManager(opts)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("platform-service mode started", "provider", r.decl.name)
	return mgr.Start(ctx)
}

// platformServiceManager builds the manager of platform-service mode: Service objects
// and the ProviderConfig on the platform cluster, end-user and workload access granted
// on the platform cluster (package platformservice).
func (r *Runtime[T]) platformServiceManager(opts Options) (mcmanager.Manager, error) {
	platformCfg := rest.CopyConfig(opts.Platform)
	opts.tune(platformCfg)
	prov, serviceCluster, err := platformservice.Provider(platformCfg, r.decl.scheme)
	if err != nil {
		return nil, err
	}
	mgr, err := mcmanager.New(platformCfg, prov, r.platformManagerOptions(opts, "platform"))
	if err != nil {
		return nil, fmt.Errorf("platform-service mode manager: %w", err)
	}
	if err := mgr.GetLocalManager().Add(serviceCluster); err != nil {
		return nil, err
	}
	if ops.Enabled(opts.HealthProbeBindAddress) {
		_ = mgr.AddHealthzCheck("ping", healthz.Ping)
		_ = mgr.AddReadyzCheck("platform-cache", ops.CacheSynced("platform", serviceCluster.GetCache()))
	}

	// The grants read and write ServiceAccounts and RBAC directly: a cache would watch
	// every ServiceAccount and role of the platform cluster.
	direct, err := client.New(platformCfg, client.Options{Scheme: r.decl.scheme})
	if err != nil {
		return nil, fmt.Errorf("platform client: %w", err)
	}
	grant := func(purpose, waiting string, perms workload.Permissions) (*platformservice.Grant, error) {
		return platformservice.NewGrant(direct, platformCfg, platformservice.GrantOptions{
			ProviderName: r.decl.name, Purpose: purpose, Permissions: perms,
			WaitingReason: waiting, Scheme: r.decl.scheme, Tune: opts.tune,
		})
	}
	endUser, err := grant(platformservice.PurposeEndUser, v1alpha1.ReasonWaitingForAccess, r.decl.mcpPerms)
	if err != nil {
		return nil, err
	}
	platform := mgr.GetLocalManager().GetClient()
	tenancy := platformservice.NewTenancy[T](platformservice.Options{
		Kind: r.decl.gvk.Kind, NewList: r.decl.newList, EndUser: endUser,
	})
	eopts := r.engineOptions(platform, tenancy, nil, opts)
	if r.decl.workload {
		// The worker lands on the platform cluster: no workload cluster is ordered.
		wl, err := grant(platformservice.PurposeWorkload, v1alpha1.ReasonWaitingForWorkload, r.decl.workloadPerms)
		if err != nil {
			return nil, err
		}
		eopts.Workload = wl
	}
	if _, err := engine.Register(mgr, eopts, engine.Setup{
		Name:                    r.decl.name + "-platform",
		NewList:                 r.decl.newList,
		ProviderConfig:          r.decl.newProviderConfig(),
		ManagedBy:               r.decl.name,
		Singleton:               true,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	}); err != nil {
		return nil, fmt.Errorf("platform-service mode controller: %w", err)
	}
	return mgr, nil
}
