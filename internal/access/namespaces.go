package access

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaceMemory is the platform client with the tenant namespaces it has seen exist
// remembered. The clusteraccess library reads the tenant's platform namespace on every
// pass, to create it if missing; namespaces are not cached (the runtime would watch
// every namespace of the platform), so each pass of each waiting tenant cost a GET. A
// namespace this process has created or read is answered from memory instead, with
// only its name: the library reads it for nothing else.
//
// The runtime never deletes a tenant namespace. Should someone else, the requests
// created in it fail; Ensure then forgets the namespace (forget), and the next pass
// reads it again and creates it.
type namespaceMemory struct {
	client.Client

	mu    sync.Mutex
	known map[string]bool
}

func newNamespaceMemory(c client.Client) *namespaceMemory {
	return &namespaceMemory{Client: c, known: map[string]bool{}}
}

// Get answers a Namespace it knows from memory and reads everything else.
func (c *namespaceMemory) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ns, isNamespace := obj.(*corev1.Namespace)
	if !isNamespace {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	c.mu.Lock()
	known := c.known[key.Name]
	c.mu.Unlock()
	if known {
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
func (c *namespaceMemory) knows(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known[name]
}

func (c *namespaceMemory) remember(name string) {
	c.mu.Lock()
	c.known[name] = true
	c.mu.Unlock()
}

// forget makes the next read of namespace name go to the server.
func (c *namespaceMemory) forget(name string) {
	c.mu.Lock()
	delete(c.known, name)
	c.mu.Unlock()
}
