package v1alpha1

import (
	"strings"
	"testing"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzValidateKCP: Validate never panics, and whatever it accepts is usable: the
// workspace is a valid kcp path, the Secret reference names a valid Secret and
// namespace. The same rules are the CRD's x-kubernetes-validations
// (test/e2e-faults checks both agree on a real API server).
func FuzzValidateKCP(f *testing.F) {
	for _, s := range [][4]string{
		{"root:org:services", "kcp-kubeconfig", "openmcp-system", ""},
		{"root", "s", "n", "kubeconfig"},
		{"Root:Org", "s", "n", ""},
		{"root::x", "s", "n", ""},
		{"root:" + strings.Repeat("a", 64), "s", "n", ""},
		{"root:-a", "s.x", "N", "k/ey"},
		{"", "", "", ""},
		{"2x5abc7qjyh1wq", "secret.with.dots", "ns", "my_key.yaml"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, ws, name, ns, key string) {
		k := &KCP{ProviderWorkspace: ws, KubeconfigSecret: SecretReference{Name: name, Namespace: ns, Key: key}}
		if err := k.Validate(); err != nil {
			if !strings.Contains(err.Error(), "spec.kcp.") {
				t.Fatalf("message %q does not name the field", err)
			}
			return
		}
		if !logicalcluster.NewPath(ws).IsValid() {
			t.Fatalf("accepted workspace %q is not a valid kcp path", ws)
		}
		for _, seg := range strings.Split(ws, ":") {
			if errs := validation.IsDNS1123Label(seg); len(errs) > 0 {
				t.Fatalf("accepted workspace %q has an invalid name %q: %v", ws, seg, errs)
			}
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("accepted Secret name %q: %v", name, errs)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("accepted namespace %q: %v", ns, errs)
		}
		if errs := validation.IsConfigMapKey(k.KubeconfigSecret.KubeconfigKey()); len(errs) > 0 {
			t.Fatalf("accepted key %q: %v", key, errs)
		}
	})
}
