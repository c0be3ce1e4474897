package command

import (
	"context"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
)

// ruler is a Runner declaring platform rules, as the builder's Runtime does.
type ruler []rbacv1.PolicyRule

func (ruler) Start(context.Context, builder.Options) error { return nil }
func (r ruler) PlatformRules() []rbacv1.PolicyRule         { return r }

// platform-rbac renders exactly the rules the runtime declares, bound to the
// ServiceAccount the openmcp-operator runs the provider with, and nothing for a
// provider that declares none.
func TestPlatformRBACIsExactlyTheDeclaredRules(t *testing.T) {
	declared := ruler{{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"get", "create"}}}
	p := echoProvider()
	p.NewRuntime = func(string, apiexport.Provisionable) (Runner, error) { return declared, nil }
	raw, err := platformRBAC(p, "openmcp-system")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("want a header, a ClusterRole and a binding, got:\n%s", raw)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(docs[1]), &role); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(role.Rules, []rbacv1.PolicyRule(declared)) {
		t.Errorf("ClusterRole rules = %v, want exactly %v", role.Rules, declared)
	}
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.Unmarshal([]byte(docs[2]), &binding); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "openmcp-system", Name: "sp-echo"}}
	if binding.RoleRef.Name != role.Name || !reflect.DeepEqual(binding.Subjects, want) {
		t.Errorf("binding = %+v, want %s bound to %v", binding, role.Name, want)
	}

	p.NewRuntime = func(string, apiexport.Provisionable) (Runner, error) { return ruler(nil), nil }
	if raw, err := platformRBAC(p, "openmcp-system"); err != nil || raw != nil {
		t.Errorf("no platform permissions: %q, %v; want nothing", raw, err)
	}
}
