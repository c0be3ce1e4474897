package sharding

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// heldLeases is the client of the Leases: it answers a read of a Lease this replica
// holds from the object its own last write returned, so that a renewal of the
// membership Lease costs one UPDATE instead of a GET and an UPDATE. The copy is as
// current as a GET: if anything else wrote the Lease since, the UPDATE built on it
// fails with a conflict, and the next read asks the API server. Every other read goes
// to the API server.
type heldLeases struct {
	client.Client
	holder func(*coordinationv1.Lease) bool

	mu   sync.Mutex
	held map[client.ObjectKey]*coordinationv1.Lease
}

// newHeldLeases wraps c; mine says whether a Lease names this replica as its holder.
func newHeldLeases(c client.Client, mine func(holder string) bool) *heldLeases {
	return &heldLeases{
		Client: c,
		holder: func(l *coordinationv1.Lease) bool {
			return l.Spec.HolderIdentity != nil && mine(*l.Spec.HolderIdentity)
		},
		held: map[client.ObjectKey]*coordinationv1.Lease{},
	}
}

func (h *heldLeases) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if l, ok := obj.(*coordinationv1.Lease); ok && len(opts) == 0 {
		h.mu.Lock()
		held := h.held[key]
		h.mu.Unlock()
		if held != nil {
			held.DeepCopyInto(l)
			return nil
		}
	}
	return h.Client.Get(ctx, key, obj, opts...)
}

func (h *heldLeases) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := h.Client.Create(ctx, obj, opts...)
	h.remember(obj, err)
	return err
}

func (h *heldLeases) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := h.Client.Update(ctx, obj, opts...)
	h.remember(obj, err)
	return err
}

func (h *heldLeases) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	h.forget(obj)
	return h.Client.Delete(ctx, obj, opts...)
}

// remember keeps what a successful write of a Lease this replica holds returned;
// anything else (a failed write, a release that clears the holder) forgets it, so
// that the next read asks the API server.
func (h *heldLeases) remember(obj client.Object, err error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	if err != nil || !h.holder(l) {
		h.forget(obj)
		return
	}
	h.mu.Lock()
	h.held[client.ObjectKeyFromObject(l)] = l.DeepCopy()
	h.mu.Unlock()
}

func (h *heldLeases) forget(obj client.Object) {
	h.mu.Lock()
	delete(h.held, client.ObjectKeyFromObject(obj))
	h.mu.Unlock()
}
