package tokens

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRemovalExplain(t *testing.T) {
	labels := map[string]string{"services.open-control-plane.io/managed-by": "echo"}
	claim := &ClaimNotAcceptedError{Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, Verb: "delete", Cause: errors.New("403")}
	for _, tc := range []struct {
		name string
		r    Removal
		done bool
		want []string
	}{
		{"all gone", Removal{Revoked: true, labels: labels}, true, nil},
		{"bindings behind a rejected claim", Removal{Revoked: true, labels: labels, Left: []Leftover{
			{Kind: "ClusterRoleBinding", Name: "echo-token-requester", Err: claim},
			{Kind: "ClusterRoleBinding", Name: "echo-workload", Err: claim},
		}}, false, []string{
			"could not remove ClusterRoleBinding echo-token-requester, ClusterRoleBinding echo-workload: permission claim \"clusterrolebindings.rbac.authorization.k8s.io\" (verb delete)",
			"accept it again", "tokens no longer work",
		}},
		{"a binding taken over", Removal{Revoked: true, labels: labels, Left: []Leftover{
			{Kind: "ClusterRoleBinding", Name: "echo-workload", NotManaged: true},
		}}, true, []string{"left ClusterRoleBinding echo-workload to you", "services.open-control-plane.io/managed-by=echo", "delete it yourself"}},
		{"the ServiceAccount taken over", Removal{labels: labels, Left: []Leftover{
			{Kind: "ServiceAccount", Name: "default/echo-workload", NotManaged: true},
		}}, false, []string{"ServiceAccount default/echo-workload", "tokens still work until it is deleted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Done(); got != tc.done {
				t.Errorf("Done() = %v, want %v", got, tc.done)
			}
			msg := tc.r.Explain()
			if len(tc.want) == 0 && msg != "" {
				t.Errorf("Explain() = %q, want empty", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Explain() = %q, want it to say %q", msg, w)
				}
			}
		})
	}
}
