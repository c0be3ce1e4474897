package restmapping

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper is a meta.RESTMapper that serves the kinds in served and counts the
// lookups that reached it; every new one stands for a fresh discovery.
type countingMapper struct {
	meta.RESTMapper
	served  map[schema.GroupKind]bool
	lookups *int
}

func (c countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	*c.lookups++
	if !c.served[gk] {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return &meta.RESTMapping{GroupVersionKind: gk.WithVersion("v1")}, nil
}

// TestMissesAndRenewalsAreBounded: a kind found missing is answered from memory for
// Recheck, Forget renews at most once per Recheck, and discovery older than MaxAge is
// renewed at its next use.
func TestMissesAndRenewalsAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	served := map[schema.GroupKind]bool{}
	lookups, renewals := 0, 0
	m, err := newMapper(func() (meta.RESTMapper, error) {
		renewals++
		return countingMapper{served: served, lookups: &lookups}, nil
	}, Options{Recheck: 5 * time.Second, MaxAge: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	gadget := schema.GroupKind{Group: "example.com", Kind: "Gadget"}
	ask := func() error { _, err := m.RESTMapping(gadget, "v1"); return err }

	for range 10 {
		if err := ask(); !meta.IsNoMatchError(err) {
			t.Fatalf("a kind not served: %v, want no match", err)
		}
	}
	if lookups != 1 {
		t.Errorf("10 lookups of a missing kind within Recheck asked %d times, want 1", lookups)
	}
	served[gadget] = true
	if err := ask(); !meta.IsNoMatchError(err) {
		t.Errorf("within Recheck of the miss: %v, want the remembered no match", err)
	}
	now = now.Add(5 * time.Second)
	if err := ask(); err != nil {
		t.Errorf("a kind added, after Recheck: %v", err)
	}

	renewals = 0
	if !m.Forget() || m.Forget() {
		t.Errorf("Forget Recheck after the mapper's birth should renew once, then not again within Recheck")
	}
	now = now.Add(5 * time.Second)
	if !m.Forget() {
		t.Errorf("Forget Recheck after the last renewal did not renew")
	}
	if renewals != 2 {
		t.Errorf("renewals %d, want 2", renewals)
	}
	now = now.Add(time.Minute)
	_ = ask()
	if renewals != 3 {
		t.Errorf("a lookup after MaxAge: renewals %d, want 3", renewals)
	}
}
