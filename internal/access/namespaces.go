package access

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespaces are the tenant namespaces seen to exist on the platform, remembered by
// name. The clusteraccess library reads the tenant's platform namespace on every pass,
// to create it if missing; namespaces are not cached (the runtime would watch every
// namespace of the platform), so each pass of each waiting tenant cost a GET. A
// namespace this process has created or read is answered from memory instead, with
// only its name: the library reads it for nothing else. The Requesters of one mode
// share one memory (Options.Namespaces): each of them orders in the same tenant
// namespace, and the first to read or create it spares the others their own read.
//
// The runtime never deletes a tenant namespace. Should someone else, the requests
// created in it fail; Ensure then forgets the namespace (forget), and the next pass
// reads it again and creates it.
type Namespaces struct {
	mu    sync.Mutex
	known map[string]bool
}

// NewNamespaces returns an empty memory.
func NewNamespaces() *Namespaces { return &Namespaces{known: map[string]bool{}} }

// namespaceMemory is the platform client answering the namespaces it remembers.
type namespaceMemory struct {
	client.Client
	*Namespaces
}

func newNamespaceMemory(c client.Client, mem *Namespaces) *namespaceMemory {
	if mem == nil {
		mem = NewNamespaces()
	}
	return &namespaceMemory{Client: c, Namespaces: mem}
}

// Get answers a Namespace it knows from memory and reads everything else.
func (c *namespaceMemory) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ns, isNamespace := obj.(*corev1.Namespace)
	if !isNamespace {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	if c.knows(key.Name) {
		*ns = corev1.Namespace{}
		ns.Name = key.Name
		return nil
	}
	err := c.Client.Get(ctx, key, obj, opts...)
	if err == nil {
		c.remember(key.Name)
	}
	return err
}

// Create remembers a Namespace it created or found existing.
func (c *namespaceMemory) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if _, isNamespace := obj.(*corev1.Namespace); isNamespace && (err == nil || apierrors.IsAlreadyExists(err)) {
		c.remember(obj.GetName())
	}
	return err
}

// knows reports whether namespace name is remembered to exist.
func (m *Namespaces) knows(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[name]
}

func (m *Namespaces) remember(name string) {
	m.mu.Lock()
	m.known[name] = true
	m.mu.Unlock()
}

// forget makes the next read of namespace name go to the server.
func (m *Namespaces) forget(name string) {
	m.mu.Lock()
	delete(m.known, name)
	m.mu.Unlock()
}
