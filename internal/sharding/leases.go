package sharding

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// heldLeases is the client of the Leases: it answers a read of a Lease this replica
// holds from the object its own last write returned, so that a renewal costs one
// UPDATE instead of a GET and an UPDATE (the coordinator's fences and the membership
// Lease both read before they write). The copy is as current as a GET: if another
// replica took the Lease since, the UPDATE built on it fails with a conflict, which
// the renewer takes for a lost Lease, just as it would on reading the new holder.
//
// A Lease another replica holds is read from the watch of the namespace's Leases,
// once it has synced (watchLeases): the coordinator reads the fence of every
// workspace it should own and has not started on every decision, one after the
// other, so that after a replica dies the survivor would GET each of its hundreds of
// fences every second until they expire, and take the last one seconds after it did.
// The watch is as safe as a GET for taking a Lease over: the UPDATE built on a
// copy that lags fails with a conflict, and the next read of that Lease asks the API
// server. Every other read goes to the API server.
type heldLeases struct {
	client.Client
	holder func(*coordinationv1.Lease) bool

	// watch holds the namespace's Leases once synced is set; nil without a watch.
	watch  cache.Cache
	synced atomic.Bool

	mu   sync.Mutex
	held map[client.ObjectKey]*coordinationv1.Lease
	// stale are Leases whose copy in the watch lost a race (a conflict): read from
	// the API server the next time.
	stale map[client.ObjectKey]bool
}

// newHeldLeases wraps c; mine says whether a Lease names this replica as its holder.
func newHeldLeases(c client.Client, mine func(holder string) bool) *heldLeases {
	return &heldLeases{
		Client: c,
		holder: func(l *coordinationv1.Lease) bool {
			return l.Spec.HolderIdentity != nil && mine(*l.Spec.HolderIdentity)
		},
		held:  map[client.ObjectKey]*coordinationv1.Lease{},
		stale: map[client.ObjectKey]bool{},
	}
}

// watchLeases starts the watch, when there is one, and answers reads of the Leases
// other replicas hold from it once it has synced; until then, and if it never syncs
// (no right to list and watch Leases), they go to the API server. It returns when ctx
// ends.
func (h *heldLeases) watchLeases(ctx context.Context, log logr.Logger) {
	if h.watch == nil {
		return
	}
	go func() {
		if err := h.watch.Start(ctx); err != nil {
			log.Error(err, "watching the Leases; reading them from the API server")
		}
	}()
	if _, err := h.watch.GetInformer(ctx, &coordinationv1.Lease{}); err != nil {
		log.Error(err, "watching the Leases; reading them from the API server")
		return
	}
	if h.watch.WaitForCacheSync(ctx) {
		h.synced.Store(true)
	}
}

func (h *heldLeases) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if l, ok := obj.(*coordinationv1.Lease); ok && len(opts) == 0 {
		h.mu.Lock()
		held, stale := h.held[key], h.stale[key]
		delete(h.stale, key)
		h.mu.Unlock()
		if held != nil {
			held.DeepCopyInto(l)
			return nil
		}
		// A Lease the watch has not seen (just created by another replica, or none
		// yet) is asked for on the server: the coordinator creates a missing fence.
		if !stale && h.synced.Load() && h.watch.Get(ctx, key, l) == nil {
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
		if err != nil {
			h.mu.Lock()
			h.stale[client.ObjectKeyFromObject(l)] = true
			h.mu.Unlock()
		}
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
