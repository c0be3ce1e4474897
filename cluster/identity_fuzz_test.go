package cluster

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzIdentityNames: for any tenant (a ControlPlane namespace/name, a logical cluster,
// a platform object), the derived tenant namespace and stable names are valid DNS-1123
// labels, deterministic, and different across modes for the same input. Inputs are
// what Kubernetes and kcp allow as names, plus arbitrary strings (which must at least
// never panic or produce an invalid name).
func FuzzIdentityNames(f *testing.F) {
	for _, seed := range []struct{ ns, name, prefix string }{
		{"default", "test-controlplane", "widget"},
		{"tenants", "alpha", ""},
		{"a", "b", strings.Repeat("p", 80)},
		{strings.Repeat("n", 63), strings.Repeat("x", 253), "worker"},
		{"", "2x5abc7qjyh1wq", "kcp-ws"},
		{"ns", "name.with.dots", "Prefix_With-Odd.chars"},
	} {
		f.Add(seed.ns, seed.name, seed.prefix)
	}
	f.Fuzz(func(t *testing.T, ns, name, prefix string) {
		if name == "" {
			t.Skip("an identity always has a name")
		}
		ids := []Identity{StandardIdentity(ns, name), KCPIdentity(name), PlatformIdentity(ns, name)}
		seen := map[string]Mode{}
		for _, id := range ids {
			tn := id.TenantNamespace()
			if errs := validation.IsDNS1123Label(tn); len(errs) > 0 {
				t.Fatalf("%s %q: tenant namespace %q invalid: %v", id.Mode, id, tn, errs)
			}
			if again := id.TenantNamespace(); again != tn {
				t.Fatalf("%s %q: tenant namespace not deterministic: %q then %q", id.Mode, id, tn, again)
			}
			if m, dup := seen[tn]; dup {
				t.Fatalf("%q: modes %s and %s share tenant namespace %q", id, m, id.Mode, tn)
			}
			seen[tn] = id.Mode
			sn := id.StableName(prefix)
			if len(sn) > validation.DNS1123LabelMaxLength {
				t.Fatalf("%s %q: StableName(%q) = %q is longer than 63", id.Mode, id, prefix, sn)
			}
			if sn != id.StableName(prefix) {
				t.Fatalf("%s %q: StableName(%q) not deterministic", id.Mode, id, prefix)
			}
			// A prefix that is itself a valid label gives a valid label.
			if len(validation.IsDNS1123Label(prefix)) == 0 || prefix == "" {
				if errs := validation.IsDNS1123Label(sn); len(errs) > 0 {
					t.Fatalf("%s %q: StableName(%q) = %q invalid: %v", id.Mode, id, prefix, sn, errs)
				}
			}
		}
	})
}

// TestIdentityNamesNoCollisionsInSample derives the tenant namespaces and a long-prefix
// stable name of 3 × 30,000 tenants shaped like real ones and finds no two equal.
func TestIdentityNamesNoCollisionsInSample(t *testing.T) {
	const n = 30000
	prefix := strings.Repeat("very-long-provider-prefix-", 3)
	namespaces, names := map[string]string{}, map[string]string{}
	check := func(id Identity) {
		for set, v := range map[*map[string]string]string{&namespaces: id.TenantNamespace(), &names: id.StableName(prefix)} {
			if other, dup := (*set)[v]; dup {
				t.Fatalf("%s and %s both derive %q", other, id, v)
			}
			(*set)[v] = string(id.Mode) + ":" + id.String()
		}
	}
	for i := range n {
		check(StandardIdentity(fmt.Sprintf("project-%d", i%97), fmt.Sprintf("cp-%d", i)))
		check(KCPIdentity(fmt.Sprintf("%014x", i*7919)))
		check(PlatformIdentity(fmt.Sprintf("ns-%d", i%13), fmt.Sprintf("svc-%d", i)))
	}
}
