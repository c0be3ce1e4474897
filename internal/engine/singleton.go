package engine

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// The singleton rule (Setup.Singleton re-queues the objects it orders): of the Service
// objects in one scope, a workspace in kcp mode or the platform cluster in
// platform-service mode, only the oldest is served, including while it is being
// deleted, so that its successor starts only after its cleanup finished. Both modes
// order the same way, so both promote the same object.

// Singleton names the scope of the singleton rule for a Tenancy's Admit.
type Singleton struct {
	// NewList returns an empty list of the Service type.
	NewList func() client.ObjectList
	// Kind names the Service type in messages.
	Kind string
	// Scope names where only one object is served ("workspace", "platform cluster"),
	// in messages.
	Scope string
}

// AdmitSingleton lets tg's object be served when it is the oldest object of its cluster;
// otherwise it returns an *access.WaitingError naming the active one.
func AdmitSingleton[T provider.Object](ctx context.Context, s Singleton, tg Target[T]) error {
	list := s.NewList()
	if err := tg.Cluster.GetCache().List(ctx, list); err != nil {
		return fmt.Errorf("listing %s objects of the %s: %w", s.Kind, s.Scope, err)
	}
	var objs []client.Object
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			objs = append(objs, co)
		}
		return nil
	})
	active := Oldest(objs)
	if active == nil || active.GetUID() == tg.Object.GetUID() {
		return nil
	}
	return &access.WaitingError{
		Reason: v1alpha1.ReasonNotSingleton,
		Message: fmt.Sprintf("only one %s per %s is served: %s is active; delete it to promote this one",
			s.Kind, s.Scope, client.ObjectKeyFromObject(active)),
	}
}

// Oldest returns the object the singleton rule serves: the oldest by creation time,
// then by namespace/name; nil for none.
func Oldest(objs []client.Object) client.Object {
	if len(objs) == 0 {
		return nil
	}
	sorted := append([]client.Object(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool {
		ti, tj := sorted[i].GetCreationTimestamp(), sorted[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return client.ObjectKeyFromObject(sorted[i]).String() < client.ObjectKeyFromObject(sorted[j]).String()
	})
	return sorted[0]
}
