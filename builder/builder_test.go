package builder_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// plainConfig is a ProviderConfig without a spec.kcp section.
type plainConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (c *plainConfig) DeepCopyObject() runtime.Object {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// widgetDeclaration is the widget's scheme and Service API CRD.
func widgetDeclaration(t *testing.T) (*runtime.Scheme, *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	return s, widgetCRD
}

// Declaring kcp mode with a ProviderConfig that cannot carry spec.kcp is refused:
// otherwise kcp mode would silently never start.
func TestCompleteRefusesKCPWithoutSpecKCP(t *testing.T) {
	s, widgetCRD := widgetDeclaration(t)
	_, err := builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&plainConfig{}).
		WorkloadCluster(cluster.Permissions{}).
		KCP(apiexport.FromCRD("widgets", widgetCRD)).
		Complete(widget.Provider{})
	if err == nil || !strings.Contains(err.Error(), "cannot carry spec.kcp") {
		t.Fatalf("Complete = %v, want a refusal naming spec.kcp", err)
	}
	// The widget's own ProviderConfig carries it.
	if _, err := builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(cluster.Permissions{}).
		KCP(apiexport.FromCRD("widgets", widgetCRD)).
		Complete(widget.Provider{}); err != nil {
		t.Fatalf("Complete with spec.kcp: %v", err)
	}
}

// The platform RBAC is exactly what the provider declared, plus in kcp mode the
// Secrets the runtime writes the workspace kubeconfigs into; nothing for a provider
// that declared nothing.
func TestPlatformRulesAreWhatIsDeclared(t *testing.T) {
	s, widgetCRD := widgetDeclaration(t)
	declared := []rbacv1.PolicyRule{{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"get", "create", "delete"}}}
	newRuntime := func(kcp bool, rules ...rbacv1.PolicyRule) *builder.Runtime[*widget.Widget] {
		b := builder.ServiceProvider[*widget.Widget]("widgets", s).
			For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
			WorkloadCluster(cluster.Permissions{}).PlatformPermissions(rules...)
		if kcp {
			b = b.KCP(apiexport.FromCRD("widgets", widgetCRD))
		}
		r, err := b.Complete(widget.Provider{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := newRuntime(false, declared...).PlatformRules(); !reflect.DeepEqual(got, declared) {
		t.Errorf("standard mode: rules = %v, want exactly the declared %v", got, declared)
	}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "delete"}}
	want := []rbacv1.PolicyRule{declared[0], secrets}
	if got := newRuntime(true, declared...).PlatformRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("kcp mode: rules = %v, want %v", got, want)
	}
	if got := newRuntime(true).PlatformRules(); got != nil {
		t.Errorf("nothing declared: rules = %v, want none", got)
	}
	_, err := builder.ServiceProvider[*widget.Widget]("widgets", s).
		For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		PlatformPermissions(rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}).
		Complete(widget.Provider{})
	if err == nil || !strings.Contains(err.Error(), "non-resource") {
		t.Errorf("Complete with a non-resource rule = %v, want a refusal", err)
	}
}

// WatchesPlatform adds list and watch on each kind to the platform RBAC; Secrets,
// ConfigMaps and a kind the provider does not write are refused at Complete.
func TestWatchesPlatform(t *testing.T) {
	s, _ := widgetDeclaration(t)
	if err := appsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	declared := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "update"}}
	newBuilder := func() *builder.Builder[*widget.Widget] {
		return builder.ServiceProvider[*widget.Widget]("widgets", s).
			For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).WorkloadCluster(cluster.Permissions{})
	}
	r, err := newBuilder().PlatformPermissions(declared).WatchesPlatform(&appsv1.Deployment{}).Complete(widget.Provider{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{declared, {APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}}}
	if got := r.PlatformRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("rules = %v, want %v", got, want)
	}
	for name, b := range map[string]*builder.Builder[*widget.Widget]{
		"Secrets":                     newBuilder().PlatformPermissions(declared).WatchesPlatform(&corev1.Secret{}),
		"without PlatformPermissions": newBuilder().WatchesPlatform(&appsv1.Deployment{}),
	} {
		if _, err := b.Complete(widget.Provider{}); err == nil || !strings.Contains(err.Error(), "WatchesPlatform") {
			t.Errorf("%s: Complete = %v, want a refusal naming WatchesPlatform", name, err)
		}
	}
}

// A further cluster needs an id of its own and a purpose or spec; the runtime's own
// registrations and a second declaration of an id are refused at Complete.
func TestAdditionalClusterDeclarations(t *testing.T) {
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	declare := func(ids ...string) error {
		b := builder.ServiceProvider[*widget.Widget]("widgets", s).For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{})
		for _, id := range ids {
			b = b.AdditionalCluster(id, builder.AdditionalCluster[*widget.Widget]{Purpose: "backup"})
		}
		_, err := b.Complete(widget.Provider{})
		return err
	}
	if err := declare("backup", "archive"); err != nil {
		t.Errorf("two further clusters: %v", err)
	}
	for _, bad := range [][]string{{"mcp"}, {"workload"}, {"backup", "backup"}, {""}} {
		if err := declare(bad...); err == nil {
			t.Errorf("further clusters %q accepted", bad)
		}
	}
	if _, err := builder.ServiceProvider[*widget.Widget]("widgets", s).For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
		AdditionalCluster("backup", builder.AdditionalCluster[*widget.Widget]{}).Complete(widget.Provider{}); err == nil {
		t.Error("a further cluster without purpose or spec accepted")
	}
}

// TestCompleteKeepsNamespacedPermissionsForKCP: a declaration standard mode's
// AccessRequest carries is accepted for kcp mode too, rules for a namespace and Role
// refs among them, and then the export claims roles and rolebindings; a RoleRef that
// no workspace could bind (a ClusterRole with a namespace, a Role without one) is
// refused with a message naming it, as openMCP's AccessRequest refuses it.
func TestCompleteKeepsNamespacedPermissionsForKCP(t *testing.T) {
	s, widgetCRD := widgetDeclaration(t)
	configmaps := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	complete := func(mcp cluster.Permissions, worker *cluster.Permissions, kcp bool) (*builder.Runtime[*widget.Widget], error) {
		b := builder.ServiceProvider[*widget.Widget]("widgets", s).
			For(&widget.Widget{}).WithProviderConfig(&widget.WidgetConfig{}).
			WorkloadCluster(cluster.Permissions{}).MCPPermissions(mcp)
		if worker != nil {
			b = b.WorkerMCPPermissions(*worker)
		}
		if kcp {
			b = b.KCP(apiexport.FromCRD("widgets", widgetCRD))
		}
		return b.Complete(widget.Provider{})
	}
	claimsRoles := func(rt *builder.Runtime[*widget.Widget]) bool {
		surface, err := rt.KCPSurface().APISurface()
		if err != nil {
			t.Fatal(err)
		}
		claims := surface.Claims()
		return slices.ContainsFunc(claims, func(c apisv1alpha2.PermissionClaim) bool { return c.Resource == "roles" }) &&
			slices.ContainsFunc(claims, func(c apisv1alpha2.PermissionClaim) bool { return c.Resource == "rolebindings" })
	}
	clusterAdmin := cluster.Permissions{RoleRefs: []commonapi.RoleRef{{Kind: "ClusterRole", Name: "cluster-admin"}}}
	rt, err := complete(clusterAdmin, &clusterAdmin, true)
	if err != nil {
		t.Fatalf("ClusterRole refs with KCP: %v", err)
	}
	if claimsRoles(rt) {
		t.Error("a declaration without a namespace makes the export claim roles: tenants would trust the runtime with more than it uses")
	}
	namespaced := cluster.Permissions{Rules: []clustersv1alpha1.PermissionsRequest{{Namespace: "team", Rules: configmaps}}}
	role := cluster.Permissions{RoleRefs: []commonapi.RoleRef{{Kind: "Role", Namespace: "team", Name: "editor"}}}
	for name, c := range map[string]struct {
		mcp    cluster.Permissions
		worker *cluster.Permissions
	}{
		"rules for a namespace": {mcp: namespaced},
		"a Role":                {mcp: clusterAdmin, worker: &role},
	} {
		rt, err := complete(c.mcp, c.worker, true)
		if err != nil {
			t.Errorf("%s with KCP: %v", name, err)
			continue
		}
		if !claimsRoles(rt) {
			t.Errorf("%s with KCP: the export claims no roles and rolebindings", name)
		}
	}
	for name, c := range map[string]struct {
		perms cluster.Permissions
		want  string
	}{
		"a ClusterRole with a namespace": {cluster.Permissions{RoleRefs: []commonapi.RoleRef{{Kind: "ClusterRole", Namespace: "team", Name: "view"}}},
			`MCPPermissions: the RoleRef ClusterRole "view" in namespace "team" cannot be bound in a workspace`},
		"a Role without a namespace": {cluster.Permissions{RoleRefs: []commonapi.RoleRef{{Kind: "Role", Name: "editor"}}},
			`MCPPermissions: the RoleRef Role "editor" in namespace "" cannot be bound in a workspace`},
	} {
		if _, err := complete(c.perms, nil, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with KCP: %v, want %q", name, err, c.want)
		}
	}
}
