// One file, one idea: StartPlatform, which assembles the local platform from the
// servers in the order their dependencies need.

package localenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
)

// PlatformOptions choose the parts of a local openMCP platform.
type PlatformOptions struct {
	// Clusters are the purposes (PurposeOnboarding, PurposeWorkload, PurposeMCP) of the
	// API servers to start besides the platform cluster, which always runs.
	Clusters []string
	// CRDs are installed, by purpose, besides openMCP's CRDs of that purpose (for
	// example a provider's ProviderConfig on the platform cluster).
	CRDs map[string][]*apiextensionsv1.CustomResourceDefinition
	// Targets are the purposes whose clusters the local platform grants access to,
	// each as a target named like the purpose (the MCP servers of MCPClusters as
	// MCPTargetName says). Default: workload and mcp, of Clusters.
	Targets []string
	// TargetConfig, when set, returns the access the local platform hands out for a
	// target instead of the server's admin config (for example through a proxy). It is
	// called once per server, for each MCP server of MCPClusters with purpose mcp.
	TargetConfig func(purpose string, admin *rest.Config) (*rest.Config, error)
	// MCPClusters, above 1 and with PurposeMCP in Clusters, starts that many MCP API
	// servers (at the same time) instead of one, so that ControlPlanes need not share
	// one: the local platform's targets MCPTargetName(0) ("mcp"), MCPTargetName(1)
	// ("mcp-2") and so on, all exclusive and in one pool (localplatform
	// TargetCluster.Profile "mcp") behind the one ClusterProfile the operator's
	// purpose mapping for mcp names. 0 or 1 is one MCP server.
	MCPClusters int
	// LocalPlatform configures the local platform.
	LocalPlatform localplatform.Options
	// ClientQPS and ClientBurst, when set, are the local platform's client limits
	// (default: the servers' admin configs', 100 and 200).
	ClientQPS   float32
	ClientBurst int
	// ControlPlanes (namespace and name) are registered on the MCP cluster's target;
	// with MCPClusters, the i-th on MCPTargetName(i mod MCPClusters).
	ControlPlanes []types.NamespacedName
	// KCP starts a kcp server (GlobalServiceAccount on) besides the API servers.
	KCP bool
	// KCPShards, with KCP, starts a sharded kcp of that many shards
	// (KCPOptions.Shards); 0 or 1 is one kcp process.
	KCPShards int
	// Provider, with KCP, prepares the provider workspace.
	Provider *ProviderWorkspace
	// StandInScheduler has the local platform play the openmcp-operator's scheduler
	// and access-request controller too, instead of running the real operator. Only
	// the benchmark uses it, as the baseline the real operator's timings are compared
	// with; by default the real openmcp-operator (see StartOperator) runs against the
	// platform cluster, and the local platform plays only the cluster provider
	// (localplatform.Options.ClusterProviderOnly), with the MCP target exclusive as on
	// openMCP. The assets folder must hold the operator's binary.
	StandInScheduler bool
	// Deployments, when set, has the operator also run its deployment controller,
	// which renders a ServiceProvider's or PlatformService's init Job and run
	// Deployment, and starts the kubelet stand-in (StartKubelet) that runs them. Not
	// with StandInScheduler.
	Deployments *KubeletOptions
	// Flux, when set, starts an OCI registry (StartRegistry, TLS with a CA Flux
	// trusts unless PlainHTTPRegistry) and Flux's source-controller and
	// helm-controller on the platform cluster (StartFlux), for HelmReleases of charts
	// pushed there (Registry.PushChart).
	Flux *FluxOptions
}

// ProviderWorkspace is what a platform team prepares in kcp for a provider's runtime:
// the workspace, the runtime's identity there, and that identity's kubeconfig.
type ProviderWorkspace struct {
	// Path of the workspace, e.g. root:providers:echo; missing parents are created.
	Path string
	// RBACFile is a manifest applied in the workspace: the runtime's ServiceAccount and
	// its rights.
	RBACFile string
	// ExportName, when set, is the APIExport the runtime serves, in place of the name
	// the RBAC file's rules on apiexports/content give (the file grants the content of
	// one export only).
	ExportName string
	// ServiceAccount is the runtime's identity (namespace and name) in the workspace.
	ServiceAccount types.NamespacedName
	// TokenTTL is the lifetime of the runtime's token. Default 24 hours.
	TokenTTL time.Duration
	// Secret, when its name is set, receives the runtime's kubeconfig (key
	// "kubeconfig") on the platform cluster, as spec.kcp.kubeconfigSecret names it;
	// its namespace is created if missing.
	Secret types.NamespacedName
}

// Platform is a running local openMCP platform.
type Platform struct {
	// The API servers; those not started are nil.
	Platform, Onboarding, Workload, MCP *APIServer
	// MCPs are the MCP API servers (PlatformOptions.MCPClusters), MCPs[i] behind the
	// target MCPTargetName(i); MCPs[0] is MCP.
	MCPs []*APIServer
	// KCP is the kcp server, with PlatformOptions.KCP.
	KCP *KCP
	// Local grants ClusterRequests and AccessRequests on the platform cluster.
	Local *localplatform.Platform
	// Operator is the real openmcp-operator; nil with PlatformOptions.StandInScheduler.
	Operator *Operator
	// Kubelet runs the operator's Jobs and Deployments, with PlatformOptions.Deployments.
	Kubelet *Kubelet
	// Registry is the OCI registry and Flux the controllers installing charts from
	// it, with PlatformOptions.Flux.
	Registry *Registry
	Flux     *Flux
	// ProviderCluster is the logical cluster of the provider workspace.
	ProviderCluster logicalcluster.Name
	// RuntimeKubeconfig is the runtime's kcp identity, with PlatformOptions.Provider.
	RuntimeKubeconfig []byte

	failed chan error
}

// Server returns the API server of a purpose, or nil.
func (p *Platform) Server(purpose string) *APIServer {
	switch purpose {
	case PurposePlatform:
		return p.Platform
	case PurposeOnboarding:
		return p.Onboarding
	case PurposeWorkload:
		return p.Workload
	case PurposeMCP:
		return p.MCP
	}
	return nil
}

// MCPTargetName is the name of the local platform's target for the i-th MCP server
// (counting from 0) of PlatformOptions.MCPClusters: "mcp", "mcp-2", "mcp-3", ...; it
// also names the server (APIServer.Name) and its folder.
func MCPTargetName(i int) string {
	if i == 0 {
		return PurposeMCP
	}
	return fmt.Sprintf("%s-%d", PurposeMCP, i+1)
}

// TargetServer returns the API server behind the local platform's target called
// name (a purpose, or MCPTargetName of an MCP server), or nil.
func (p *Platform) TargetServer(name string) *APIServer {
	for _, s := range append([]*APIServer{p.Platform, p.Onboarding, p.Workload}, p.MCPs...) {
		if s != nil && s.Name == name {
			return s
		}
	}
	return nil
}

// Failed receives the local platform's error if it stops before the Env does.
func (p *Platform) Failed() <-chan error { return p.failed }

// StartPlatform starts the servers, the local platform with its targets and
// ControlPlanes and, with kcp, the provider workspace. kcp starts while the API
// servers do. Env.Stop stops everything, also after an error.
func (e *Env) StartPlatform(ctx context.Context, opts PlatformOptions) (*Platform, error) {
	if opts.StandInScheduler && opts.Deployments != nil {
		return nil, errors.New("deployments need the real openmcp-operator, not the stand-in scheduler")
	}
	p := &Platform{failed: make(chan error, 1)}
	type kcpResult struct {
		k   *KCP
		err error
	}
	kcpc := make(chan kcpResult, 1)
	if opts.KCP {
		go func() {
			k, err := e.StartKCP(ctx, KCPOptions{FeatureGates: []string{"GlobalServiceAccount=true"}, Shards: opts.KCPShards})
			kcpc <- kcpResult{k, err}
		}()
	}
	// The MCP servers beyond the first start while the others do.
	var extraMCPs []*APIServer
	var extraErrs []error
	var extra sync.WaitGroup
	if slices.Contains(opts.Clusters, PurposeMCP) && opts.MCPClusters > 1 {
		extraMCPs, extraErrs = make([]*APIServer, opts.MCPClusters-1), make([]error, opts.MCPClusters-1)
		for i := range extraMCPs {
			extra.Go(func() {
				crds, err := OpenMCPCRDs(PurposeMCP)
				if err == nil {
					extraMCPs[i], err = e.StartAPIServer(MCPTargetName(i+1), append(crds, opts.CRDs[PurposeMCP]...))
				}
				extraErrs[i] = err
			})
		}
	}
	var startErr error
	for _, purpose := range append([]string{PurposePlatform}, opts.Clusters...) {
		crds, err := OpenMCPCRDs(purpose)
		if err != nil {
			startErr = err
			break
		}
		s, err := e.StartAPIServer(purpose, append(crds, opts.CRDs[purpose]...))
		if err != nil {
			startErr = err
			break
		}
		switch purpose {
		case PurposePlatform:
			p.Platform = s
		case PurposeOnboarding:
			p.Onboarding = s
		case PurposeWorkload:
			p.Workload = s
		case PurposeMCP:
			p.MCP = s
		default:
			startErr = fmt.Errorf("unknown cluster purpose %q", purpose)
		}
	}
	if opts.KCP {
		// Waited for also after an error: kcp's stop is registered once it started.
		r := <-kcpc
		p.KCP = r.k
		startErr = errors.Join(startErr, r.err)
	}
	// Likewise.
	extra.Wait()
	startErr = errors.Join(append([]error{startErr}, extraErrs...)...)
	if p.MCP != nil {
		p.MCPs = append([]*APIServer{p.MCP}, extraMCPs...)
	}
	if startErr != nil {
		return nil, startErr
	}
	if err := e.simulateNodes(ctx, p); err != nil {
		return nil, err
	}
	if err := e.startLocalPlatform(ctx, p, opts); err != nil {
		return nil, err
	}
	if opts.Flux != nil {
		var err error
		if p.Registry, err = e.StartRegistry(ctx, RegistryOptions{PlainHTTP: opts.Flux.PlainHTTPRegistry}); err != nil {
			return nil, err
		}
		fo := *opts.Flux
		fo.CABundle = append(slices.Clone(fo.CABundle), p.Registry.CA...)
		if p.Flux, err = e.StartFlux(ctx, p.Platform, fo); err != nil {
			return nil, err
		}
	}
	if opts.KCP && opts.Provider != nil {
		var err error
		if p.ProviderCluster, p.RuntimeKubeconfig, err = p.PrepareProvider(ctx, *opts.Provider); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// simulateNodes gives the workload and MCP clusters a simulated node each
// (StartSimulatedNodes), at the same time: what a provider installs there runs as far
// as the API tells, as Helm's wait and Deployment rollouts need. The platform cluster's
// node is the kubelet stand-in's (PlatformOptions.Deployments); the onboarding cluster
// runs no pods.
func (e *Env) simulateNodes(ctx context.Context, p *Platform) error {
	servers := slices.Clone(p.MCPs)
	if p.Workload != nil {
		servers = append(servers, p.Workload)
	}
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { _, errs[i] = e.StartSimulatedNodes(ctx, s, 1) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startLocalPlatform adds the targets, registers the ControlPlanes and runs the local
// platform until the Env stops.
func (e *Env) startLocalPlatform(ctx context.Context, p *Platform, opts PlatformOptions) error {
	limit := func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		if opts.ClientQPS > 0 {
			cfg.QPS, cfg.Burst = opts.ClientQPS, opts.ClientBurst
		}
		return cfg
	}
	lpOpts := opts.LocalPlatform
	operator := !opts.StandInScheduler
	lpOpts.ClusterProviderOnly = lpOpts.ClusterProviderOnly || operator
	lp, err := localplatform.New(limit(p.Platform.Config), lpOpts)
	if err != nil {
		return fmt.Errorf("local platform: %w", err)
	}
	targets := opts.Targets
	if targets == nil {
		for _, purpose := range []string{PurposeWorkload, PurposeMCP} {
			if slices.Contains(opts.Clusters, purpose) {
				targets = append(targets, purpose)
			}
		}
	}
	var mappings []PurposeMapping
	for _, purpose := range targets {
		servers := []*APIServer{p.Server(purpose)}
		if purpose == PurposeMCP && len(p.MCPs) > 1 {
			servers = p.MCPs
		}
		if servers[0] == nil {
			return fmt.Errorf("local platform target %q: no such cluster started", purpose)
		}
		tenancy := clustersv1alpha1.TENANCY_SHARED
		if purpose == PurposeMCP && (operator || len(servers) > 1) {
			// A pool of targets is exclusive.
			tenancy = clustersv1alpha1.TENANCY_EXCLUSIVE
		}
		for _, s := range servers {
			cfg := s.Config
			if opts.TargetConfig != nil {
				if cfg, err = opts.TargetConfig(purpose, s.Config); err != nil {
					return fmt.Errorf("local platform target %q: %w", s.Name, err)
				}
			}
			tc := localplatform.TargetCluster{Name: s.Name, Purposes: []string{purpose}, Tenancy: tenancy, Config: limit(cfg)}
			if len(servers) > 1 {
				tc.Profile = purpose
			}
			if err := lp.AddCluster(tc); err != nil {
				return fmt.Errorf("local platform target %q: %w", s.Name, err)
			}
		}
		mappings = append(mappings, PurposeMapping{
			Purpose: purpose, Profile: lp.ClusterProfileName(purpose), Tenancy: tenancy, Namespace: lp.Options().Namespace,
		})
	}
	if operator {
		// Before the operator starts: it routes AccessRequests by their Cluster's
		// ClusterProfile and backs off when the profile is missing.
		if err := lp.EnsureClusterProfiles(ctx); err != nil {
			return err
		}
		oo := OperatorOptions{PurposeMappings: mappings}
		if opts.Deployments != nil {
			oo.Controllers = append(slices.Clone(DefaultOperatorControllers), ControllerDeployment)
		}
		if p.Operator, err = e.StartOperator(ctx, p.Platform, oo); err != nil {
			return err
		}
		if opts.Deployments != nil {
			if p.Kubelet, err = e.StartKubelet(ctx, p.Platform, *opts.Deployments); err != nil {
				return err
			}
		}
	} else {
		// The stand-in scheduler grants these itself, running or not.
		if err := registerControlPlanes(ctx, lp, opts.ControlPlanes, len(p.MCPs)); err != nil {
			return err
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := lp.Start(lctx); err != nil && lctx.Err() == nil {
			p.failed <- fmt.Errorf("local platform stopped: %w", err)
		}
	}()
	e.onStop("local platform", func() error { cancel(); <-done; return nil })
	p.Local = lp
	if operator {
		// The real scheduler grants these.
		return registerControlPlanes(ctx, lp, opts.ControlPlanes, len(p.MCPs))
	}
	return nil
}

// registerControlPlanes registers ControlPlanes on the targets of the mcps MCP
// servers, one after the other in turn.
func registerControlPlanes(ctx context.Context, lp *localplatform.Platform, cps []types.NamespacedName, mcps int) error {
	for i, cp := range cps {
		if err := lp.RegisterControlPlane(ctx, cp.Name, cp.Namespace, MCPTargetName(i%max(mcps, 1))); err != nil {
			return fmt.Errorf("registering ControlPlane %s: %w", cp, err)
		}
	}
	return nil
}

// PrepareProvider does what a platform team does in kcp for a provider's runtime and
// returns the provider workspace's logical cluster and the runtime's kubeconfig. A
// platform holds any number of provider workspaces, each with its own runtime.
func (p *Platform) PrepareProvider(ctx context.Context, pw ProviderWorkspace) (logicalcluster.Name, []byte, error) {
	if p.KCP == nil {
		return "", nil, errors.New("a provider workspace needs the platform's kcp (PlatformOptions.KCP)")
	}
	path := logicalcluster.NewPath(pw.Path)
	lc, err := p.KCP.CreateWorkspacePath(ctx, path)
	if err != nil {
		return "", nil, err
	}
	admin := p.KCP.ConfigFor(path)
	provider, err := client.New(admin, client.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("client for workspace %s: %w", path, err)
	}
	if pw.RBACFile != "" {
		var mutate func(*unstructured.Unstructured)
		if pw.ExportName != "" {
			mutate = func(o *unstructured.Unstructured) { contentOfExport(o, pw.ExportName) }
		}
		if err := ApplyFile(ctx, provider, pw.RBACFile, mutate); err != nil {
			return "", nil, fmt.Errorf("the runtime's RBAC in %s: %w", path, err)
		}
	}
	if pw.TokenTTL == 0 {
		pw.TokenTTL = 24 * time.Hour
	}
	var kubeconfig []byte
	if p.KCP.Sharded() {
		// A shard refuses ServiceAccount tokens of workspaces on other shards (it
		// looks the account up and does not find it): the runtime, which reaches every
		// shard's virtual workspace, is a user with a client certificate there,
		// bound wherever the RBAC file binds the ServiceAccount
		// (docs/design/sharded-kcp.md).
		user := "kcp-serviceprovider:" + pw.ServiceAccount.Name
		if err := bindUserLikeServiceAccount(ctx, provider, pw.ServiceAccount, user); err != nil {
			return "", nil, fmt.Errorf("binding %s in %s: %w", user, path, err)
		}
		if kubeconfig, err = p.KCP.ClientCertificateKubeconfig(path.String(), user); err != nil {
			return "", nil, err
		}
	} else if kubeconfig, err = ServiceAccountKubeconfig(ctx, admin, pw.ServiceAccount.Namespace, pw.ServiceAccount.Name, pw.TokenTTL); err != nil {
		return "", nil, err
	}
	if pw.Secret.Name == "" {
		return lc, kubeconfig, nil
	}
	pf, err := client.New(p.Platform.Config, client.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("client for the platform cluster: %w", err)
	}
	if err := pf.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pw.Secret.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("creating namespace %s: %w", pw.Secret.Namespace, err)
	}
	if err := pf.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: pw.Secret.Namespace, Name: pw.Secret.Name},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}); err != nil {
		return "", nil, fmt.Errorf("creating Secret %s: %w", pw.Secret, err)
	}
	return lc, kubeconfig, nil
}

// bindUserLikeServiceAccount adds user as a subject to every ClusterRoleBinding and
// RoleBinding of the workspace that binds the ServiceAccount sa.
func bindUserLikeServiceAccount(ctx context.Context, c client.Client, sa types.NamespacedName, user string) error {
	// kcp's own controllers may write a binding meanwhile: read again and retry.
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error { return bindUserOnce(ctx, c, sa, user) })
}

func bindUserOnce(ctx context.Context, c client.Client, sa types.NamespacedName, user string) error {
	crbs, rbs := &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleBindingList{}
	if err := c.List(ctx, crbs); err != nil {
		return err
	}
	if err := c.List(ctx, rbs); err != nil {
		return err
	}
	bindsSA := func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == sa.Namespace && s.Name == sa.Name
	}
	isUser := func(s rbacv1.Subject) bool { return s.Kind == rbacv1.UserKind && s.Name == user }
	type binding struct {
		obj      client.Object
		subjects *[]rbacv1.Subject
	}
	var bindings []binding
	for i := range crbs.Items {
		bindings = append(bindings, binding{&crbs.Items[i], &crbs.Items[i].Subjects})
	}
	for i := range rbs.Items {
		bindings = append(bindings, binding{&rbs.Items[i], &rbs.Items[i].Subjects})
	}
	for _, b := range bindings {
		if slices.ContainsFunc(*b.subjects, bindsSA) && !slices.ContainsFunc(*b.subjects, isUser) {
			*b.subjects = append(*b.subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user})
			if err := c.Update(ctx, b.obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// contentOfExport has a ClusterRole's rules on apiexports/content name the export.
func contentOfExport(o *unstructured.Unstructured, export string) {
	if o.GetKind() != "ClusterRole" {
		return
	}
	rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		if slices.Contains(resources, "apiexports/content") {
			rule["resourceNames"] = []any{export}
		}
	}
	_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
}
