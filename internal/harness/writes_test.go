package harness

import "testing"

func TestUpdatesResource(t *testing.T) {
	for path, want := range map[string]bool{
		"/apis/example.io/v1/namespaces/tenants/widgets/alpha":        true,
		"/apis/example.io/v1/namespaces/tenants/widgets/alpha/status": true,
		"/clusters/root:a/apis/example.io/v1/widgets/alpha":           true,
		"/apis/example.io/v1/namespaces/tenants/widgets":              false,
		"/apis/example.io/v1/namespaces/tenants/gadgets/alpha":        false,
		"/api/v1/namespaces/widgets":                                  false,
	} {
		if got := updatesResource(path, "widgets"); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}
