package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memory remembers one value per object for a while: what the engine last did for it
// (reported transitions and written statuses, which guard against a cache that has not
// yet seen the engine's own last write) or where its events go (events.go). ttl
// outlasts the need by far and keeps the memory to recently changed objects.
type memory[V any] struct {
	ttl time.Duration

	mu     sync.Mutex
	last   map[types.UID]remembered[V]
	pruned time.Time
}

type remembered[V any] struct {
	v  V
	at time.Time
}

func newMemory[V any](ttl time.Duration) *memory[V] {
	return &memory[V]{ttl: ttl, last: map[types.UID]remembered[V]{}}
}

// update replaces uid's value with change(current value, whether there is one) under
// the lock; change returns the new value and whether to store it.
func (m *memory[V]) update(uid types.UID, change func(v V, ok bool) (V, bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if now.Sub(m.pruned) > m.ttl {
		for k, r := range m.last {
			if now.Sub(r.at) > m.ttl {
				delete(m.last, k)
			}
		}
		m.pruned = now
	}
	r, ok := m.last[uid]
	if ok && now.Sub(r.at) > m.ttl {
		r, ok = remembered[V]{}, false
	}
	if v, store := change(r.v, ok); store {
		m.last[uid] = remembered[V]{v: v, at: now}
	}
}

// get returns uid's value, if remembered.
func (m *memory[V]) get(uid types.UID) (v V, ok bool) {
	m.update(uid, func(cur V, found bool) (V, bool) {
		v, ok = cur, found
		return cur, false
	})
	return v, ok
}

// forget drops an object that is gone.
func (m *memory[V]) forget(uid types.UID) {
	m.mu.Lock()
	delete(m.last, uid)
	m.mu.Unlock()
}

// removed remembers the objects being deleted whose provider Delete has finished,
// so that the releases that follow do not ask the provider again. A replica that
// takes an object over, or restarts, asks once more: Delete is idempotent.
type removed struct{ *memory[struct{}] }

// newRemoved keeps an object for ten minutes: a release that takes longer asks the
// provider once more, which finds nothing left to remove.
func newRemoved() *removed { return &removed{newMemory[struct{}](10 * time.Minute)} }

// remember records that the provider's Delete of uid has finished.
func (r *removed) remember(uid types.UID) {
	r.update(uid, func(struct{}, bool) (struct{}, bool) { return struct{}{}, true })
}
