package builder

import "testing"

// TestLeaseNamespaceDefaultsToNamespace: one namespace serves both unless a
// deployment puts the leases elsewhere.
func TestLeaseNamespaceDefaultsToNamespace(t *testing.T) {
	o := Options{Namespace: "openmcp-system"}
	o.defaults()
	if o.LeaseNamespace != "openmcp-system" {
		t.Errorf("LeaseNamespace %q, want the provider's namespace", o.LeaseNamespace)
	}
	o = Options{Namespace: "openmcp-system", LeaseNamespace: "leases"}
	o.defaults()
	if o.LeaseNamespace != "leases" || o.Namespace != "openmcp-system" {
		t.Errorf("LeaseNamespace %q, Namespace %q", o.LeaseNamespace, o.Namespace)
	}
}
