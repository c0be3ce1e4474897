package testkit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localplatform"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
)

// DefaultWaitTimeout bounds each of the kit's waits unless Options.WaitTimeout says
// otherwise: generous for two cores, and still a failure, never a hang, when the
// runtime does not get there.
const DefaultWaitTimeout = 2 * time.Minute

// waitTimeout is Options.WaitTimeout or its default.
func (e *Env) waitTimeout() time.Duration { return cmp.Or(e.opts.WaitTimeout, DefaultWaitTimeout) }

// Tenant is one tenant of the provider: a kcp workspace bound to its APIExport, or a
// ControlPlane on the platform with its namespace on the onboarding cluster.
type Tenant struct {
	// Mode is cluster.ModeKCP or cluster.ModeStandard.
	Mode cluster.Mode
	// Name names the tenant: the workspace (under root) or the ControlPlane.
	Name string
	// Client is where the tenant creates its Service object: its workspace, or the
	// onboarding cluster. EndUser is the end-user cluster the provider is handed
	// (cluster.MCPFromCtx): the workspace again, or the tenant's MCP cluster (see
	// Options.MCPClusters). Both are admin.
	Client, EndUser client.Client
	// Identity is what cluster.IdentityFromCtx returns for this tenant's object.
	Identity cluster.Identity

	env       *Env
	namespace string
	// inspect is an admin client of the end-user cluster with the harness scheme.
	inspect client.Client
	// byTenant selects the platform requests the runtime ordered for this tenant.
	byTenant client.MatchingLabels
}

// Tenants returns one tenant of each mode named name: a kcp workspace and a
// ControlPlane, for a test that runs the same steps in both.
func (e *Env) Tenants(t *testing.T, name string) []*Tenant {
	t.Helper()
	return []*Tenant{e.KCPTenant(t, name), e.StandardTenant(t, name)}
}

// KCPTenant creates the workspace root:<name> and binds the provider's APIExport in
// it, accepting exactly the export's permission claims for the runtime's label
// (apiexport.AcceptedClaims), as a tenant following the provider's apibinding does.
func (e *Env) KCPTenant(t *testing.T, name string) *Tenant {
	t.Helper()
	ctx := t.Context()
	export := &apisv1alpha2.APIExport{}
	if err := e.inspect.kcp.Get(ctx, client.ObjectKey{Name: e.surface.ExportName}, export); err != nil {
		t.Fatalf("testkit: reading the APIExport %s: %v", e.surface.ExportName, err)
	}
	path, lc := e.kcp.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), name)
	e.kcp.CreateAPIBinding(ctx, t, path, e.opts.Provider.Name, e.ProviderWorkspace, e.surface.ExportName,
		apiexport.AcceptedClaims(e.opts.Provider.Name, export.Spec.PermissionClaims...))
	c := harness.NewClient(t, e.kcp.ConfigFor(path), e.opts.Scheme)
	return &Tenant{Mode: cluster.ModeKCP, Name: name, Client: c, EndUser: c, Identity: cluster.KCPIdentity(lc.String()),
		env: e, namespace: corev1.NamespaceDefault, inspect: harness.NewClient(t, e.kcp.ConfigFor(path)),
		byTenant: client.MatchingLabels{openmcpconst.ManagedByLabel: e.opts.Provider.Name, workspaces.LogicalClusterLabel: lc.String()}}
}

// StandardTenant registers the ControlPlane default/<name> on an MCP cluster, as the
// openmcp-operator does for a tenant's ControlPlane: with Options.MCPClusters N, the
// k-th standard tenant of the Env (counting from 0, in the order of the calls) gets
// the (k mod N)-th MCP server, the first one Env.MCP. Its Service object lives in
// namespace default of the onboarding cluster, named like the ControlPlane.
func (e *Env) StandardTenant(t *testing.T, name string) *Tenant {
	t.Helper()
	ns := corev1.NamespaceDefault
	mcps := e.platform.MCPs
	i := e.standardTenants.next() % max(len(mcps), 1)
	endUser, inspect := e.MCP, e.inspect.mcp
	if i > 0 {
		endUser, inspect = harness.NewClient(t, mcps[i].Config, e.opts.Scheme), mcps[i].Client
	}
	if err := e.platform.Local.RegisterControlPlane(t.Context(), name, ns, localenv.MCPTargetName(i)); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return &Tenant{Mode: cluster.ModeStandard, Name: name, Client: e.Onboarding, EndUser: endUser,
		Identity: cluster.StandardIdentity(ns, name), env: e, namespace: ns, inspect: inspect,
		byTenant: client.MatchingLabels{openmcpconst.ManagedByLabel: e.opts.Provider.Name,
			openmcpconst.OnboardingNameLabel: name, openmcpconst.OnboardingNamespaceLabel: ns}}
}

// ObjectMeta is where the tenant's Service object goes: named like the tenant (which
// standard mode requires: the object names its ControlPlane), in namespace default.
func (tn *Tenant) ObjectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: tn.namespace, Name: tn.Name}
}

// Create creates the tenant's Service object. In a workspace the bound resource is
// served a moment after the binding says Bound: only that is retried.
func (tn *Tenant) Create(t *testing.T, obj client.Object) {
	t.Helper()
	harness.Eventually(t.Context(), t, 30*time.Second, "creating "+describe(tn, obj), func(ctx context.Context) error {
		err := tn.Client.Create(ctx, obj)
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			t.Fatalf("creating %s: %v", describe(tn, obj), err)
		}
		return err
	})
}

// WaitReady waits until the object's Ready condition is True for its current
// generation and reads it into obj; a failure quotes the condition's reason and
// message.
func (tn *Tenant) WaitReady(t *testing.T, obj client.Object) {
	t.Helper()
	tn.WaitCondition(t, obj, v1alpha1.ConditionReady, metav1.ConditionTrue, "")
}

// WaitCondition waits until the object's condition of type cond has status (and
// reason, unless empty) for its current generation and reads it into obj.
func (tn *Tenant) WaitCondition(t *testing.T, obj client.Object, cond string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	harness.Eventually(t.Context(), t, tn.env.waitTimeout(), fmt.Sprintf("%s %s=%s %s", describe(tn, obj), cond, status, reason), func(ctx context.Context) error {
		u, err := tn.get(ctx, obj, key)
		if err != nil {
			return err
		}
		c := findCondition(u, cond)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) || (c.ObservedGeneration != 0 && c.ObservedGeneration != u.GetGeneration()) {
			return fmt.Errorf("%s (generation %d)", describeCondition(c, cond), u.GetGeneration())
		}
		return nil
	})
	if err := tn.Client.Get(t.Context(), key, obj); err != nil {
		t.Fatal(err)
	}
}

// get reads the object at key as unstructured, of obj's kind.
func (tn *Tenant) get(ctx context.Context, obj client.Object, key client.ObjectKey) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, tn.env.opts.Scheme)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, tn.Client.Get(ctx, key, u)
}

// DeleteAndExpectNoLeftovers deletes the tenant's object, waits until it is gone (the
// runtime has called Delete and removed its finalizer), and then until nothing the
// runtime ordered or created for the tenant is left: no ClusterRequest or
// AccessRequest on the platform cluster, none of the credentials granted for them on
// the workload and end-user clusters, and in kcp mode none of the ServiceAccounts and
// RBAC the runtime labels as its own in the workspace. What the provider itself
// installed is the provider's to assert. Each wait takes at most Options.WaitTimeout;
// a failure says where the object stands (finalizers, Ready condition) and what of
// the runtime's is left.
func (tn *Tenant) DeleteAndExpectNoLeftovers(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := t.Context()
	ids := tn.accessIDs(ctx, t)
	// The check proves something only if it sees the runtime's objects while they are
	// there: the requests, the credentials granted for them, and in a workspace the
	// runtime's ServiceAccounts.
	before := strings.Join(tn.leftovers(ctx, ids), ", ")
	for _, want := range tn.expectedBeforeDeletion() {
		if !strings.Contains(before, want) {
			t.Fatalf("before deleting %s the leftover check sees no %q, so it would prove nothing; it sees: %s", describe(tn, obj), want, before)
		}
	}
	if err := tn.Client.Delete(ctx, obj); err != nil {
		t.Fatalf("deleting %s: %v", describe(tn, obj), err)
	}
	key := client.ObjectKeyFromObject(obj)
	get := func(ctx context.Context) (*unstructured.Unstructured, error) { return tn.get(ctx, obj, key) }
	if err := waitGone(ctx, tn.env.waitTimeout(), describe(tn, obj), get); err != nil {
		t.Fatalf("%v; of the runtime's for the tenant: %s", err, orNothing(tn.leftovers(context.WithoutCancel(ctx), ids)))
	}
	harness.Eventually(ctx, t, tn.env.waitTimeout(), "nothing of the runtime's left for tenant "+tn.Name, func(ctx context.Context) error {
		if left := tn.leftovers(ctx, ids); len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// waitGone waits until get answers NotFound; the error says where the object stood
// when the wait ended.
func waitGone(ctx context.Context, timeout time.Duration, what string, get func(context.Context) (*unstructured.Unstructured, error)) error {
	return localenv.Poll(ctx, timeout, what+" gone", func(ctx context.Context) error {
		u, err := get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("still there? %w", err)
		}
		return fmt.Errorf("still there: %s", describeState(u))
	})
}

// describeState says where an object stands, for a failed wait: its finalizers,
// whether its deletion was requested, and its Ready condition.
func describeState(u *unstructured.Unstructured) string {
	state := fmt.Sprintf("generation %d, finalizers %v", u.GetGeneration(), u.GetFinalizers())
	if ts := u.GetDeletionTimestamp(); ts != nil {
		state += ", deletion requested " + ts.UTC().Format(time.RFC3339)
	}
	return state + ", " + describeCondition(findCondition(u, v1alpha1.ConditionReady), v1alpha1.ConditionReady)
}

func orNothing(items []string) string {
	if len(items) == 0 {
		return "nothing left"
	}
	return strings.Join(items, ", ")
}

// expectedBeforeDeletion are what leftovers must name while the object is served.
func (tn *Tenant) expectedBeforeDeletion() []string {
	// kcp mode needs a workload cluster (builder.Complete), so every provider the
	// kit serves orders one.
	want := []string{"ClusterRequest ", "AccessRequest ", "ServiceAccount "}
	if tn.Mode == cluster.ModeKCP {
		want = append(want, "on workspace "+tn.Name)
	}
	return want
}

// accessIDs are the local cluster provider's IDs of the tenant's AccessRequests: what
// it labels the credentials it grants for each with.
func (tn *Tenant) accessIDs(ctx context.Context, t *testing.T) []string {
	t.Helper()
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := tn.env.inspect.platform.List(ctx, ars, tn.byTenant); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range ars.Items {
		ids = append(ids, localplatform.AccessID(&ars.Items[i]))
	}
	return ids
}

// leftovers names what is left of the tenant.
func (tn *Tenant) leftovers(ctx context.Context, ids []string) []string {
	var left []string
	count := func(c client.Client, where string, list client.ObjectList, sel client.MatchingLabels) {
		if err := c.List(ctx, list, sel); err != nil {
			left = append(left, fmt.Sprintf("(listing on %s: %v)", where, err))
			return
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			m, _ := meta.Accessor(o)
			gvk, _ := apiutil.GVKForObject(o, c.Scheme())
			left = append(left, fmt.Sprintf("%s %s on %s", gvk.Kind, client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}, where))
			return nil
		})
	}
	in := tn.env.inspect
	count(in.platform, "the platform cluster", &clustersv1alpha1.ClusterRequestList{}, tn.byTenant)
	count(in.platform, "the platform cluster", &clustersv1alpha1.AccessRequestList{}, tn.byTenant)
	credentials := func() []client.ObjectList {
		return []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.SecretList{}, &rbacv1.RoleList{},
			&rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}}
	}
	mcp := in.mcp
	if tn.Mode == cluster.ModeStandard {
		mcp = tn.inspect // the tenant's own MCP server
	}
	for _, id := range ids {
		for where, c := range map[string]client.Client{"the platform cluster": in.platform, "the workload cluster": in.workload, "the MCP cluster": mcp} {
			for _, list := range credentials() {
				count(c, where, list, client.MatchingLabels{localplatform.AccessIDLabel: id})
			}
		}
	}
	if tn.Mode == cluster.ModeKCP {
		for _, list := range credentials() {
			count(tn.inspect, "workspace "+tn.Name, list, client.MatchingLabels{apiexport.ManagedByLabel: tn.env.opts.Provider.Name})
		}
	}
	slices.Sort(left)
	return left
}

// counter hands out 0, 1, 2, ... to concurrent callers.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n - 1
}

// describe names obj for messages: its kind, key and tenant.
func describe(tn *Tenant, obj client.Object) string {
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := apiutil.GVKForObject(obj, tn.env.opts.Scheme); err == nil {
		kind = gvk.Kind
	}
	return fmt.Sprintf("%s %s (%s tenant %s)", kind, client.ObjectKeyFromObject(obj), tn.Mode, tn.Name)
}

// findCondition returns the object's status condition of type cond, or nil.
func findCondition(u *unstructured.Unstructured, cond string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok || m["type"] != cond {
			continue
		}
		c := &metav1.Condition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, c); err != nil {
			return nil
		}
		return c
	}
	return nil
}

// describeCondition says what a condition is, for a failed wait.
func describeCondition(c *metav1.Condition, cond string) string {
	if c == nil {
		return "no " + cond + " condition yet"
	}
	return fmt.Sprintf("%s=%s, reason %s: %s", c.Type, c.Status, c.Reason, c.Message)
}
