package builder

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpmode"
	"github.com/openmcp-project/kcp-serviceprovider/internal/sharding"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
)

// KCP wires the provider's kcp API surface. Without it kcp mode never starts, whatever
// the ProviderConfig says: kcp support is opt-in per provider.
func (b *Builder[T]) KCP(p apiexport.Provisionable) *Builder[T] {
	b.kcp = p
	return b
}

// ManagedByLabel marks what the runtime creates in tenant workspaces; tenants can
// narrow the permission claims they accept to objects carrying it.
const ManagedByLabel = apiexport.ManagedByLabel

// kcpSupervisor returns kcp mode's supervisor (package kcpmode), which follows
// spec.kcp and builds kcp mode's manager with kcpManager whenever a configuration
// works.
func (r *Runtime[T]) kcpSupervisor(opts Options, surface apiexport.Provisionable) (*kcpmode.Supervisor, error) {
	platformCfg := rest.CopyConfig(opts.Platform)
	opts.tune(platformCfg)
	platform, err := client.New(platformCfg, client.Options{Scheme: r.decl.scheme})
	if err != nil {
		return nil, fmt.Errorf("platform client: %w", err)
	}
	return kcpmode.New(kcpmode.Options{
		Name: r.decl.name, ProviderConfigName: opts.Migration.ProviderConfig(r.decl.name), Scheme: r.decl.scheme, NewProviderConfig: r.decl.newProviderConfig,
		Surface: surface, Platform: platform, PlatformConfig: platformCfg, Tune: opts.tune,
		EventSource: eventSource(r.decl.name), Replica: opts.Replica, AllowAPIDowngrade: opts.AllowAPIDowngrade,
		NewManager: func(_ context.Context, c kcpmode.Connection) (mcmanager.Manager, error) {
			return r.kcpManager(opts, c)
		},
	}), nil
}

// kcpChecks are kcp mode's liveness and readiness checks, for whoever serves the
// process's probes.
func kcpChecks(sup *kcpmode.Supervisor) (live, ready map[string]healthz.Checker) {
	if sup == nil {
		return nil, nil
	}
	return map[string]healthz.Checker{"kcp-supervisor": sup.Healthz}, map[string]healthz.Checker{"kcp": sup.Readyz}
}

// kcpManager builds kcp mode's manager for a kcp connection that works: the Service
// objects of every workspace bound to the APIExport, served through its virtual
// workspace.
func (r *Runtime[T]) kcpManager(opts Options, c kcpmode.Connection) (mcmanager.Manager, error) {
	var workerRights *workspaces.Rights
	if r.decl.workerPerms != nil {
		w := workspaceRights(*r.decl.workerPerms)
		workerRights = &w
	}
	mode, err := workspaces.NewMode[T](c, workspaces.ModeOptions[T]{
		Name: r.decl.name, Scheme: r.decl.scheme, NewObject: r.decl.newObject, NewList: r.decl.newList, Kind: r.decl.gvk.Kind,
		Rights: workspaceRights(r.decl.mcpPerms), WorkerRights: workerRights,
		Tune: opts.tune, RetryInterval: opts.RetryInterval, FieldOwner: fieldOwner(opts.Replica),
	})
	if err != nil {
		return nil, err
	}
	mopts := r.platformManagerOptions(opts, "kcp")
	// The standard-mode manager, or the Runtime itself, serves metrics and probes for
	// the process: this manager is replaced whenever spec.kcp changes.
	mopts.Metrics.BindAddress = "0"
	mopts.HealthProbeBindAddress = "0"
	platformCfg := rest.CopyConfig(opts.Platform)
	opts.tune(platformCfg)
	// Several replicas share the workspaces rather than elect a leader
	// (docs/design/replicas.md): they divide the kcp shards, each watching only the
	// workspaces of its own, and the coordinator engages each workspace in one of
	// the replicas of its shard.
	var replicas *sharding.Replicas
	var mcOpts []mcmanager.Option
	if opts.LeaderElection {
		mopts.LeaderElection = false
		if replicas, err = r.replicas(opts, mode.Provider); err != nil {
			return nil, err
		}
		mode.Provider.SetServes(replicas.ServesShard)
		mcOpts = append(mcOpts, mcmanager.WithCoordinator(replicas.Coordinator()))
	}
	mgr, err := mcmanager.New(platformCfg, mode.Provider, mopts, mcOpts...)
	if err != nil {
		return nil, fmt.Errorf("kcp mode manager: %w", err)
	}
	if replicas != nil {
		if err := mgr.Add(replicas.Ownership()); err != nil {
			return nil, err
		}
	}

	eopts, err := r.engineOptions(mgr, workspaces.Labels, opts, r.requestNames(nil))
	if err != nil {
		return nil, err
	}
	if eopts.PlatformWriter != nil {
		// The workspace kubeconfigs live in no platform Secret: the runtime writes
		// them, for the provider's child objects to name.
		eopts.KubeconfigSecrets = eopts.PlatformWriter
	}
	e, err := mode.Register(mgr, eopts, engine.Setup{
		Name:                    r.decl.name + "-kcp",
		NewList:                 r.decl.newList,
		ProviderConfig:          r.decl.newProviderConfig(),
		ManagedBy:               r.decl.name,
		Singleton:               true,
		Restartable:             true,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	})
	if err != nil {
		return nil, fmt.Errorf("kcp mode controller: %w", err)
	}
	// A workspace that is briefly not engaged (this manager restarting, the virtual
	// workspace reconnecting) is not swept: the sweep wants SweepAbsences consecutive
	// absences, and it restarts with the manager. With several replicas, each sweeps
	// the gone workspaces the sharder names it for.
	var responsible func(map[string]string) bool
	if replicas != nil {
		responsible = func(l map[string]string) bool { return replicas.Responsible(l[workspaces.LogicalClusterLabel]) }
	}
	if err := addSweep(mgr, e, r.decl.name, kcpTenantLabels, responsible, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// kcpLeaseDuration is how long the other kcp-mode replicas wait before they take a
// silent one's workspaces when Options.LeaseDuration is not set: a SIGKILLed
// replica's workspaces are served again within about this plus two RetryPeriods and
// the reconciles queued behind them (docs/design/replicas.md, Timings).
const kcpLeaseDuration = 8 * time.Second

// replicas builds this replica's share of kcp mode's workspaces. Its membership Lease
// is renewed through a client of its own, without a client-side rate limit: a renewal
// queued behind a burst of reconciles would miss the renewal deadline, and the replica
// would stop serving. The lease timing paces it; the platform API server's priority
// and fairness guards the server.
func (r *Runtime[T]) replicas(opts Options, shards sharding.Shards) (*sharding.Replicas, error) {
	cfg := rest.CopyConfig(opts.Platform)
	opts.tune(cfg)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: r.decl.scheme})
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return sharding.New(sharding.Options{
		Client: c, Namespace: opts.LeaseNamespace, Name: r.decl.name + "-kcp", Replica: opts.Replica,
		LeaseDuration: cmp.Or(opts.LeaseDuration, kcpLeaseDuration), RenewDeadline: opts.RenewDeadline, Probe: opts.RetryPeriod, Provider: r.decl.name,
		Shards: shards,
		Log:    log.Log.WithName(r.decl.name),
	}), nil
}

// workspaceRights turns declared end-user permissions into a workspace credential's
// rights: the rules without a namespace into the runtime's ClusterRole, those for a
// namespace into a Role there, each RoleRef into a binding to the workspace's
// ClusterRole or to the Role of its namespace. Complete refused what a workspace
// credential cannot carry (kcpExpressible).
func workspaceRights(p cluster.Permissions) workspaces.Rights {
	var rights workspaces.Rights
	in := func(ns string) *tokens.NamespaceRights {
		for i := range rights.Namespaced {
			if rights.Namespaced[i].Namespace == ns {
				return &rights.Namespaced[i]
			}
		}
		rights.Namespaced = append(rights.Namespaced, tokens.NamespaceRights{Namespace: ns})
		return &rights.Namespaced[len(rights.Namespaced)-1]
	}
	for _, pr := range p.Rules {
		if pr.Namespace == "" {
			rights.Rules = append(rights.Rules, pr.Rules...)
			continue
		}
		nr := in(pr.Namespace)
		nr.Rules = append(nr.Rules, pr.Rules...)
	}
	for _, ref := range p.RoleRefs {
		if ref.Kind == "Role" {
			nr := in(ref.Namespace)
			nr.Roles = append(nr.Roles, ref.Name)
			continue
		}
		rights.ClusterRoles = append(rights.ClusterRoles, ref.Name)
	}
	return rights
}

// namespaced says whether any of perms scopes a permission to a namespace, which the
// runtime keeps in Roles and RoleBindings that the export must claim.
func namespaced(perms ...*cluster.Permissions) bool {
	for _, p := range perms {
		if p != nil && len(workspaceRights(*p).Namespaced) > 0 {
			return true
		}
	}
	return false
}

// withRoleClaims adds apiexport.RoleClaims to the claims of surface.
func withRoleClaims(surface apiexport.Provisionable) apiexport.Provisionable {
	return apiexport.SurfaceFunc(func() (apiexport.Surface, error) {
		s, err := surface.APISurface()
		if err != nil {
			return s, err
		}
		s.PermissionClaims = append(slices.Clone(s.PermissionClaims), apiexport.RoleClaims()...)
		return s, nil
	})
}

// kcpExpressible says why kcp mode cannot give a workspace credential what p declares,
// or nil: a RoleRef must name a ClusterRole without a namespace or a Role with one, as
// openMCP's AccessRequest wants it too, since a workspace has nothing else to bind.
func kcpExpressible(what string, p cluster.Permissions) error {
	for _, ref := range p.RoleRefs {
		switch {
		case ref.Kind == "ClusterRole" && ref.Namespace == "":
		case ref.Kind == "Role" && ref.Namespace != "":
		default:
			return fmt.Errorf("%s: the RoleRef %s %q in namespace %q cannot be bound in a workspace: a ClusterRole takes no namespace, a Role needs one", what, ref.Kind, ref.Name, ref.Namespace)
		}
	}
	return nil
}
