package builder

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// Builder collects a provider's declarations.
type Builder[T provider.Object] struct {
	name           string
	scheme         *runtime.Scheme
	object         T
	providerConfig provider.ProviderConfig
	workload       bool
	workloadPerms  cluster.Permissions
	mcpPerms       cluster.Permissions
	workerPerms    *cluster.Permissions
	platformRules  []rbacv1.PolicyRule
	platformWakes  []client.Object
	kcp            apiexport.Provisionable
	references     []engine.Reference[T]
	additional     []additionalCluster[T]
	errs           []error
}

// ServiceProvider starts a Builder for the provider called name (its ProviderConfig's
// name, the managed-by label of its requests, the prefix of its leader election IDs).
// scheme must know the Service API and ProviderConfig types.
func ServiceProvider[T provider.Object](name string, scheme *runtime.Scheme) *Builder[T] {
	b := &Builder[T]{name: name, scheme: scheme}
	if name == "" {
		b.errs = append(b.errs, errors.New("provider name is empty"))
	}
	return b
}

// For names the Service API type.
func (b *Builder[T]) For(obj T) *Builder[T] {
	b.object = obj
	return b
}

// WithProviderConfig names the ProviderConfig type.
func (b *Builder[T]) WithProviderConfig(pc provider.ProviderConfig) *Builder[T] {
	b.providerConfig = pc
	return b
}

// WorkloadCluster declares that the provider's workers run on a workload cluster (the
// workerless pattern, required for kcp) and what they need there. A provider that
// does not call it runs its workers on the end-user cluster.
func (b *Builder[T]) WorkloadCluster(perms cluster.Permissions) *Builder[T] {
	b.workload = true
	b.workloadPerms = perms
	return b
}

// MCPPermissions declares what the provider needs on the end-user cluster, and, unless
// WorkerMCPPermissions declares the worker's apart, what the kubeconfig it hands its
// worker may do there. Standard mode asks the platform for exactly this (an
// AccessRequest). In kcp mode each workspace gets the same: the rules without a
// namespace in a ClusterRole, those for a namespace in a Role of that namespace, each
// RoleRef a binding to that ClusterRole of the workspace (cluster-admin, say) or to
// that Role of its namespace. A tenant whose workspace lacks the role or the namespace
// waits with RoleMissing or NamespaceMissing: the runtime creates neither there. Rules
// for a namespace or Role refs make the export claim roles and rolebindings
// (apiexport.RoleClaims), which the tenants accept.
func (b *Builder[T]) MCPPermissions(perms cluster.Permissions) *Builder[T] {
	b.mcpPerms = perms
	return b
}

// WorkerMCPPermissions declares what the provider's long-running worker may do on the
// end-user cluster, apart from the provider's own rights (MCPPermissions), which a
// provider needs for installing (CRDs, bindings) and its worker should not keep. The
// runtime then holds two credentials per tenant, each allowed only what was declared
// for it: in kcp mode two ServiceAccounts with a ClusterRole each in the tenant's
// workspace, in standard mode two AccessRequests for the ControlPlane. The provider
// reaches the end-user cluster with its own (cluster.MCPFromCtx) and hands the
// worker's to its worker (cluster.WorkerKubeconfigFromCtx). Deletion removes both.
// Platform-service mode serves one credential (the platform's grant) to both.
func (b *Builder[T]) WorkerMCPPermissions(perms cluster.Permissions) *Builder[T] {
	b.workerPerms = &perms
	return b
}

// PlatformPermissions declares what the provider writes on the platform cluster, in
// each tenant's platform namespace: the child objects of providers that install
// through Flux (OCIRepository, HelmRelease, a values Secret). With it the provider
// gets cluster.PlatformWriterFromCtx, confined to the tenant's namespace, and a
// platform Secret for every kubeconfig it is handed (cluster.Access.Secret), which in
// kcp mode the runtime writes. The rules are cluster-wide RBAC for the runtime's
// ServiceAccount (tenant namespaces come and go): PlatformRules renders them, and the
// kcp-serviceprovider platform-rbac command prints them as a ClusterRole. Rules
// naming a namespace or cluster-scoped kind still fail in the writer.
func (b *Builder[T]) PlatformPermissions(rules ...rbacv1.PolicyRule) *Builder[T] {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			b.errs = append(b.errs, errors.New("PlatformPermissions: non-resource URLs are not platform objects"))
		}
	}
	b.platformRules = append(b.platformRules, rules...)
	return b
}

// WatchesPlatform declares kinds the provider writes with cluster.PlatformWriterFromCtx
// whose changes should call it again for the tenant (a HelmRelease whose status Flux
// changed), so that it can return a Pending result without polling. The writer labels
// what it writes with the provider and the tenant; the runtime watches these kinds on
// the platform cluster, holding only the objects with its label, and maps a change back
// to the tenant's object as it does the tenant's requests (in standard and kcp mode).
// The runtime's ServiceAccount gets list and watch on them (PlatformRules). Secrets and
// ConfigMaps are refused: a provider reads its own back through the writer.
func (b *Builder[T]) WatchesPlatform(objs ...client.Object) *Builder[T] {
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Secret, *corev1.ConfigMap:
			b.errs = append(b.errs, fmt.Errorf("WatchesPlatform: %T: the runtime does not watch Secrets or ConfigMaps of the platform", o))
			continue
		}
		b.platformWakes = append(b.platformWakes, o)
	}
	return b
}

// AdditionalCluster declares a further cluster each tenant needs beyond the end-user
// and workload clusters (opencontrolplane-runtime's custom registrations): a
// ClusterRequest and an AccessRequest with token access, ordered under the
// registration id (their names end in --<id>). The provider reaches it with
// cluster.AdditionalFromCtx(ctx, id); it is ordered after the workload cluster and
// released after the provider's Delete, before the workload cluster.
func (b *Builder[T]) AdditionalCluster(id string, c AdditionalCluster[T]) *Builder[T] {
	switch {
	case id == "" || (c.Purpose == "" && c.Spec == nil):
		b.errs = append(b.errs, errors.New("AdditionalCluster: an id and a Purpose or Spec are required"))
	case slices.Contains([]string{"mcp", "mcp-worker", workload.RegistrationID}, id):
		b.errs = append(b.errs, fmt.Errorf("AdditionalCluster: id %q is the runtime's own", id))
	case slices.ContainsFunc(b.additional, func(a additionalCluster[T]) bool { return a.id == id }):
		b.errs = append(b.errs, fmt.Errorf("AdditionalCluster: id %q declared twice", id))
	}
	b.additional = append(b.additional, additionalCluster[T]{id: id, AdditionalCluster: c})
	return b
}

// AdditionalCluster is a further cluster's declaration.
type AdditionalCluster[T provider.Object] struct {
	// Purpose of the ClusterRequest, when Spec is not set.
	Purpose string
	// Spec, when set, derives the ClusterRequest's spec from the object and the
	// ProviderConfig it is served with (what opencontrolplane-runtime's
	// AdditionalDataGenerators fed a registration). It is asked when the request is
	// created; pc is nil while a deletion cannot load the ProviderConfig.
	Spec func(obj T, pc provider.ProviderConfig) (*clustersv1alpha1.ClusterRequestSpec, error)
	// Permissions of the token access there.
	Permissions cluster.Permissions
}

type additionalCluster[T provider.Object] struct {
	id string
	AdditionalCluster[T]
}

// specGenerator is the library's generator of a further cluster's ClusterRequest spec.
func (a additionalCluster[T]) specGenerator() func(reconcile.Request, ...any) (*clustersv1alpha1.ClusterRequestSpec, error) {
	if a.Spec == nil {
		return nil
	}
	return func(req reconcile.Request, data ...any) (*clustersv1alpha1.ClusterRequestSpec, error) {
		for _, d := range data {
			if od, ok := d.(engine.ObjectData[T]); ok {
				return a.Spec(od.Object, od.ProviderConfig)
			}
		}
		return nil, fmt.Errorf("cluster %s of %s: the object is unknown here", a.id, req)
	}
}

// WatchReferences declares the Secrets or ConfigMaps (kind) on the platform cluster that
// the ProviderConfig or Service objects name, such as a bucket's credentials: uses
// returns the names in namespace (empty: the provider's own namespace,
// Options.Namespace) that obj uses, through pc or its own spec (pc is nil while the
// ProviderConfig cannot be loaded). A change to one of them reconciles exactly the
// objects that use it: every object, for a name the ProviderConfig holds. Only that
// namespace is watched. This is opencontrolplane-runtime's SecretWatcher and
// ConfigMapWatcher (docs/migrating-from-opencontrolplane-runtime.md).
func (b *Builder[T]) WatchReferences(kind client.Object, namespace string, uses func(pc provider.ProviderConfig, obj T) []string) *Builder[T] {
	if kind == nil || uses == nil {
		b.errs = append(b.errs, errors.New("WatchReferences: kind and uses are required"))
		return b
	}
	b.references = append(b.references, engine.Reference[T]{Kind: kind, Namespace: namespace, Uses: uses})
	return b
}

// Complete validates the declarations and returns the Runtime.
func (b *Builder[T]) Complete(r provider.Reconciler[T]) (*Runtime[T], error) {
	errs := b.errs
	if r == nil {
		errs = append(errs, errors.New("no Reconciler"))
	}
	if reflect.ValueOf(b.object).IsNil() {
		errs = append(errs, errors.New("no Service API type: call For"))
	}
	if b.providerConfig == nil {
		errs = append(errs, errors.New("no ProviderConfig type: call WithProviderConfig"))
	}
	if b.scheme == nil {
		errs = append(errs, errors.New("no scheme"))
	}
	if _, ok := b.providerConfig.(provider.KCPConfigurer); b.kcp != nil && b.providerConfig != nil && !ok {
		// Without it spec.kcp can never be read, and kcp mode would silently never start.
		errs = append(errs, fmt.Errorf("KCP is declared but the ProviderConfig type %T cannot carry spec.kcp: embed v1alpha1.KCP and implement provider.KCPConfigurer", b.providerConfig))
	}
	if b.kcp != nil && !b.workload {
		// kcp workspaces have no compute: a provider whose worker runs on the end-user
		// cluster (the classic pattern) cannot serve them.
		errs = append(errs, errors.New("kcp mode needs WorkloadCluster: workspaces cannot run workers"))
	}
	if b.kcp != nil {
		if err := kcpExpressible("MCPPermissions", b.mcpPerms); err != nil {
			errs = append(errs, err)
		}
		if b.workerPerms != nil {
			if err := kcpExpressible("WorkerMCPPermissions", *b.workerPerms); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(b.platformWakes) > 0 && len(b.platformRules) == 0 {
		errs = append(errs, errors.New("WatchesPlatform needs PlatformPermissions: only what the provider writes on the platform is watched"))
	}
	for _, o := range b.platformWakes {
		if _, err := apiutil.GVKForObject(o, b.scheme); err != nil {
			errs = append(errs, fmt.Errorf("WatchesPlatform: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("service provider %q: %w", b.name, errors.Join(errs...))
	}
	surface := b.kcp
	if surface != nil && namespaced(&b.mcpPerms, b.workerPerms) {
		surface = withRoleClaims(surface)
	}
	gvk, err := apiutil.GVKForObject(b.object, b.scheme)
	if err != nil {
		return nil, fmt.Errorf("service provider %q: Service API type: %w", b.name, err)
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if _, err := b.scheme.New(listGVK); err != nil {
		return nil, fmt.Errorf("service provider %q: %s is not in the scheme: %w", b.name, listGVK, err)
	}
	if _, err := apiutil.GVKForObject(b.providerConfig, b.scheme); err != nil {
		return nil, fmt.Errorf("service provider %q: ProviderConfig type: %w", b.name, err)
	}
	return &Runtime[T]{decl: declarations[T]{
		name: b.name, scheme: b.scheme, gvk: gvk, listGVK: listGVK,
		object: b.object, providerConfig: b.providerConfig,
		workload: b.workload, workloadPerms: b.workloadPerms, mcpPerms: b.mcpPerms, workerPerms: b.workerPerms,
		platformRules: b.platformRules, platformWakes: b.platformWakes, kcp: surface, reconciler: r, references: b.references, additional: b.additional,
	}}, nil
}

// declarations are the validated results of a Builder.
type declarations[T provider.Object] struct {
	name           string
	scheme         *runtime.Scheme
	gvk, listGVK   schema.GroupVersionKind
	object         T
	providerConfig provider.ProviderConfig
	workload       bool
	workloadPerms  cluster.Permissions
	mcpPerms       cluster.Permissions
	// workerPerms are the worker's on the end-user cluster when declared apart; nil
	// when it shares the provider's credential.
	workerPerms *cluster.Permissions
	// platformRules are what the provider writes in tenant platform namespaces; nil
	// when it writes nothing there.
	platformRules []rbacv1.PolicyRule
	// platformWakes are kinds of platformRules whose changes call the provider again
	// (WatchesPlatform).
	platformWakes []client.Object
	kcp           apiexport.Provisionable
	reconciler    provider.Reconciler[T]
	// references are the platform objects the ProviderConfig or objects name
	// (WatchReferences); an empty namespace is Options.Namespace.
	references []engine.Reference[T]
	// additional are the further clusters (AdditionalCluster).
	additional []additionalCluster[T]
}

func (d *declarations[T]) newObject() T {
	return reflect.New(reflect.TypeOf(d.object).Elem()).Interface().(T)
}

func (d *declarations[T]) newList() client.ObjectList {
	l, _ := d.scheme.New(d.listGVK)
	return l.(client.ObjectList)
}

func (d *declarations[T]) newProviderConfig() provider.ProviderConfig {
	return reflect.New(reflect.TypeOf(d.providerConfig).Elem()).Interface().(provider.ProviderConfig)
}

// Finalizer is `<service group>/finalizer`, openMCP's convention.
func (d *declarations[T]) finalizer() string { return d.gvk.Group + "/finalizer" }

// KCPSurface is the kcp surface the runtime provisions: the one given to KCP, with the
// claims the declared permissions need (apiexport.RoleClaims). nil without KCP. The
// kcp-manifests command renders it.
func (r *Runtime[T]) KCPSurface() apiexport.Provisionable { return r.decl.kcp }

// PlatformRules is the RBAC the runtime's ServiceAccount needs on the platform cluster,
// cluster-wide, for what the provider declared with PlatformPermissions: the declared
// rules and, in kcp mode, the Secrets it writes the workspace kubeconfigs into. nil
// when the provider declared none. The platform-rbac command renders it.
func (r *Runtime[T]) PlatformRules() []rbacv1.PolicyRule {
	if len(r.decl.platformRules) == 0 {
		return nil
	}
	rules := slices.Clone(r.decl.platformRules)
	for _, o := range r.decl.platformWakes {
		// The resource as the API server names it from the kind, as RBAC rules of CRDs
		// usually are (helmreleases, ocirepositories).
		gvk, err := apiutil.GVKForObject(o, r.decl.scheme)
		if err != nil {
			continue // Complete refused it
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gvk.Group}, Resources: []string{plural.Resource}, Verbs: []string{"list", "watch"}})
	}
	if r.decl.kcp != nil {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: []string{"get", "create", "update", "delete"}})
	}
	return rules
}
