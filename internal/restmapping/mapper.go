package restmapping

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Defaults of Options.
const (
	DefaultRecheck = 5 * time.Second
	DefaultMaxAge  = 10 * time.Minute
)

// Options tune a Mapper; the zero value takes the defaults.
type Options struct {
	// Recheck is how long a kind found missing is answered as missing before the
	// cluster is asked again, and the least time between two renewals that 404s
	// force. Default DefaultRecheck.
	Recheck time.Duration
	// MaxAge is how long discovery is trusted: the first lookup after it renews it.
	// It bounds how long a kind removed without any request for it meeting a 404 is
	// still answered as served. Default DefaultMaxAge.
	MaxAge time.Duration
	// Now is the clock; default time.Now. For tests.
	Now func() time.Time
}

// Mapper is a meta.RESTMapper that follows the cluster's APIs: controller-runtime's
// dynamic mapper, renewed when it may be out of date (see the package comment).
type Mapper struct {
	newInner func() (meta.RESTMapper, error)
	opts     Options

	mu    sync.Mutex
	inner meta.RESTMapper
	born  time.Time
	// missing are the lookups that found no match, by lookup, with when and the
	// answer, so that they are answered again without asking the cluster.
	missing map[string]miss
}

type miss struct {
	at  time.Time
	err error
}

var _ meta.RESTMapper = &Mapper{}

// New returns a Mapper discovering through cfg and hc, the HTTP client of the client
// that will use it (so that discovery shares its connections).
func New(cfg *rest.Config, hc *http.Client, opts Options) (*Mapper, error) {
	return newMapper(func() (meta.RESTMapper, error) { return apiutil.NewDynamicRESTMapper(cfg, hc) }, opts)
}

func newMapper(newInner func() (meta.RESTMapper, error), opts Options) (*Mapper, error) {
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	inner, err := newInner()
	if err != nil {
		return nil, err
	}
	return &Mapper{newInner: newInner, opts: opts, inner: inner, born: opts.Now(), missing: map[string]miss{}}, nil
}

// Forget drops what the mapper discovered, so that the next lookup asks the cluster,
// unless it was renewed less than Options.Recheck ago. It reports whether it did.
func (m *Mapper) Forget() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	if now.Sub(m.born) < m.opts.Recheck {
		return false
	}
	return m.renewLocked(now)
}

// renewLocked replaces the inner mapper by a new one, which discovers on its first
// lookups, and drops the misses that have expired.
func (m *Mapper) renewLocked(now time.Time) bool {
	inner, err := m.newInner()
	if err != nil {
		// The constructor fails only without an HTTP client, which New had; keep
		// answering from what is known.
		return false
	}
	m.inner, m.born = inner, now
	for k, ms := range m.missing {
		if now.Sub(ms.at) >= m.opts.Recheck {
			delete(m.missing, k)
		}
	}
	return true
}

// begin returns the mapper to ask for lookup key, or the answer of a recent miss.
func (m *Mapper) begin(key string) (meta.RESTMapper, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	if now.Sub(m.born) >= m.opts.MaxAge {
		m.renewLocked(now)
	}
	if ms, ok := m.missing[key]; ok {
		if now.Sub(ms.at) < m.opts.Recheck {
			return nil, ms.err
		}
		delete(m.missing, key)
	}
	return m.inner, nil
}

// end remembers a lookup that found no match.
func (m *Mapper) end(key string, err error) {
	if !meta.IsNoMatchError(err) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.missing[key] = miss{at: m.opts.Now(), err: err}
}

// lookup answers one lookup through the current inner mapper, or from a recent miss.
func lookup[T any](m *Mapper, key string, ask func(meta.RESTMapper) (T, error)) (T, error) {
	inner, err := m.begin(key)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := ask(inner)
	m.end(key, err)
	return res, err
}

func gvrKey(what string, r schema.GroupVersionResource) string {
	return what + " " + r.String()
}

func gkKey(what string, gk schema.GroupKind, versions []string) string {
	return what + " " + gk.String() + " " + strings.Join(versions, ",")
}

// KindFor implements meta.RESTMapper.
func (m *Mapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return lookup(m, gvrKey("kind", r), func(in meta.RESTMapper) (schema.GroupVersionKind, error) { return in.KindFor(r) })
}

// KindsFor implements meta.RESTMapper.
func (m *Mapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return lookup(m, gvrKey("kinds", r), func(in meta.RESTMapper) ([]schema.GroupVersionKind, error) { return in.KindsFor(r) })
}

// ResourceFor implements meta.RESTMapper.
func (m *Mapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return lookup(m, gvrKey("resource", r), func(in meta.RESTMapper) (schema.GroupVersionResource, error) { return in.ResourceFor(r) })
}

// ResourcesFor implements meta.RESTMapper.
func (m *Mapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return lookup(m, gvrKey("resources", r), func(in meta.RESTMapper) ([]schema.GroupVersionResource, error) { return in.ResourcesFor(r) })
}

// RESTMapping implements meta.RESTMapper.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return lookup(m, gkKey("mapping", gk, versions), func(in meta.RESTMapper) (*meta.RESTMapping, error) { return in.RESTMapping(gk, versions...) })
}

// RESTMappings implements meta.RESTMapper.
func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return lookup(m, gkKey("mappings", gk, versions), func(in meta.RESTMapper) ([]*meta.RESTMapping, error) { return in.RESTMappings(gk, versions...) })
}

// ResourceSingularizer implements meta.RESTMapper.
func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	inner, _ := m.begin("")
	return inner.ResourceSingularizer(resource)
}
