package sweep

import (
	"context"
	"errors"
	"testing"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestProviderDeleteBeforeRevocation: a gone tenant's requests are revoked only after
// the provider's Delete reported done; a Delete in progress or failing keeps them, and
// Delete is not called again once the revocation started.
func TestProviderDeleteBeforeRevocation(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clustersv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{openmcpconst.ManagedByLabel: "widgets", "tenant": "gone"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "tenant-ns", Name: name, Labels: labels, Finalizers: []string{advanced.Finalizer}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&clustersv1alpha1.AccessRequest{ObjectMeta: meta("widgets--gone--wl")},
		&clustersv1alpha1.ClusterRequest{ObjectMeta: meta("widgets--gone--wl")},
	).Build()

	type answer struct {
		done bool
		err  error
	}
	answers := []answer{{false, nil}, {false, errors.New("workload cluster unreachable")}, {true, nil}}
	calls := 0
	s := New(Options{
		Client: c, ManagedBy: "widgets", TenantLabels: []string{"tenant"}, Absences: 1,
		Present: func(context.Context, map[string]string) (bool, error) { return false, nil },
		Delete: func(_ context.Context, ars []*clustersv1alpha1.AccessRequest) (bool, error) {
			if len(ars) != 1 {
				t.Errorf("Delete got %d AccessRequests, want the tenant's one", len(ars))
			}
			a := answers[min(calls, len(answers)-1)]
			calls++
			return a.done, a.err
		},
	})
	accessRequest := func() *clustersv1alpha1.AccessRequest {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-ns", Name: "widgets--gone--wl"}, ar); err != nil {
			t.Fatal(err)
		}
		return ar
	}

	// In progress, then failing: nothing is revoked.
	for i, wantErr := range []bool{false, true} {
		res, err := s.Sweep(ctx)
		if (err != nil) != wantErr || res.ProviderDeletesPending != 1 || res.Deleted != 0 {
			t.Fatalf("sweep %d: result %+v, error %v", i+1, res, err)
		}
		if !accessRequest().DeletionTimestamp.IsZero() {
			t.Fatalf("sweep %d: the AccessRequest is being deleted before the provider's Delete finished", i+1)
		}
	}
	// Done: the revocation starts with the AccessRequest.
	res, err := s.Sweep(ctx)
	if err != nil || res.ProviderDeletes != 1 || res.Deleted != 1 {
		t.Fatalf("sweep 3: result %+v, error %v", res, err)
	}
	if accessRequest().DeletionTimestamp.IsZero() {
		t.Fatal("the AccessRequest is not being deleted after the provider's Delete finished")
	}
	// A new Sweeper (a restarted runtime) sees the revocation under way and does not
	// call Delete again.
	s = New(s.opts)
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("Delete called %d times, want 3", calls)
	}
}

// TestSweepsOnlyItsShare: with several replicas, a replica leaves the gone tenants
// another is responsible for alone, and sweeps them once it is responsible.
func TestSweepsOnlyItsShare(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clustersv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{openmcpconst.ManagedByLabel: "widgets", "tenant": "gone"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-ns", Name: "widgets--gone--wl", Labels: labels}},
	).Build()
	mine, presentAsked, deletes := false, 0, 0
	s := New(Options{
		Client: c, ManagedBy: "widgets", TenantLabels: []string{"tenant"}, Absences: 2,
		Responsible: func(l map[string]string) bool {
			if l["tenant"] != "gone" {
				t.Errorf("Responsible asked with labels %v", l)
			}
			return mine
		},
		Present: func(context.Context, map[string]string) (bool, error) { presentAsked++; return false, nil },
		Delete:  func(context.Context, []*clustersv1alpha1.AccessRequest) (bool, error) { deletes++; return true, nil },
	})
	for i := range 3 {
		if res, err := s.Sweep(ctx); err != nil || res.Suspects != 0 || res.Deleted != 0 {
			t.Fatalf("sweep %d of another replica's tenant: result %+v, error %v", i+1, res, err)
		}
	}
	if presentAsked != 0 || deletes != 0 {
		t.Fatalf("another replica's tenant: Present asked %d times, Delete called %d times, want neither", presentAsked, deletes)
	}
	// Responsible now (the other replica left): the absences count from here.
	mine = true
	if res, err := s.Sweep(ctx); err != nil || res.Suspects != 1 {
		t.Fatalf("first own sweep: result %+v, error %v, want one suspect", res, err)
	}
	if res, err := s.Sweep(ctx); err != nil || res.Deleted != 1 || deletes != 1 {
		t.Fatalf("second own sweep: result %+v, error %v, Delete called %d times", res, err, deletes)
	}
}
