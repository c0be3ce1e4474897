package builder

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/ops"
	"github.com/openmcp-project/kcp-serviceprovider/internal/platformservice"
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
	mopts := platformservice.ModeOptions{
		ProviderName: r.decl.name, Kind: r.decl.gvk.Kind, NewList: r.decl.newList,
		Scheme: r.decl.scheme, EndUser: r.decl.mcpPerms, Tune: opts.tune,
	}
	if r.decl.workload {
		mopts.Workload = &r.decl.workloadPerms
	}
	mode, err := platformservice.NewMode[T](platformCfg, mopts)
	if err != nil {
		return nil, err
	}
	mgr, err := mcmanager.New(platformCfg, mode.Provider, r.platformManagerOptions(opts, "platform"))
	if err != nil {
		return nil, fmt.Errorf("platform-service mode manager: %w", err)
	}
	if ops.Enabled(opts.HealthProbeBindAddress) {
		_ = mgr.AddHealthzCheck("ping", healthz.Ping)
		_ = mgr.AddReadyzCheck("platform-cache", ops.CacheSynced("platform", mode.Cluster.GetCache()))
	}
	eopts, err := r.engineOptions(mgr, nil, opts, r.requestNames(nil))
	if err != nil {
		return nil, err
	}
	if _, err := mode.Register(mgr, eopts, engine.Setup{
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
