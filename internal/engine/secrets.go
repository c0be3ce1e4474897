package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// kubeconfigSecrets keeps, in a tenant's platform namespace, a Secret with each
// end-user kubeconfig the runtime holds for it but no platform Secret does: kcp mode's
// minted workspace tokens. Child objects on the platform (a Flux HelmRelease) name it
// through cluster.Access.Secret. A Secret is written when its kubeconfig changed (a
// renewed token), so a steady tenant costs nothing, and removed with the tenant's
// access. Standard mode's accesses come with the AccessRequest's own Secret and are
// left alone.
type kubeconfigSecrets struct {
	client   client.Client
	provider string

	mu      sync.Mutex
	written map[string][sha256.Size]byte // namespace/name: digest of the kubeconfig written
}

func newKubeconfigSecrets(c client.Client, provider string) *kubeconfigSecrets {
	return &kubeconfigSecrets{client: c, provider: provider, written: map[string][sha256.Size]byte{}}
}

// Purposes of the Secrets, the last part of their names.
const (
	secretPurposeMCP    = "mcp-kubeconfig"
	secretPurposeWorker = "worker-kubeconfig"
)

func (s *kubeconfigSecrets) name(purpose string) string { return s.provider + "--" + purpose }

// publish fills in the tenant's end-user accesses' Secret references, writing the
// Secrets where needed. The accesses are copied: the modes hand out shared ones.
func (s *kubeconfigSecrets) publish(ctx context.Context, namespace string, t *cluster.Tenant) error {
	if s == nil {
		return nil
	}
	shared := t.Worker == t.MCP
	var err error
	if t.MCP, err = s.publishOne(ctx, namespace, secretPurposeMCP, t.MCP); err != nil {
		return err
	}
	if shared {
		t.Worker = t.MCP
		return nil
	}
	t.Worker, err = s.publishOne(ctx, namespace, secretPurposeWorker, t.Worker)
	return err
}

func (s *kubeconfigSecrets) publishOne(ctx context.Context, namespace, purpose string, a *cluster.Access) (*cluster.Access, error) {
	if a == nil || a.Secret != nil || len(a.Kubeconfig) == 0 {
		return a, nil
	}
	key := client.ObjectKey{Namespace: namespace, Name: s.name(purpose)}
	digest := sha256.Sum256(a.Kubeconfig)
	s.mu.Lock()
	known := s.written[key.String()] == digest
	s.mu.Unlock()
	if !known {
		if err := s.write(ctx, key, purpose, a.Kubeconfig); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.written[key.String()] = digest
		s.mu.Unlock()
	}
	out := *a
	out.Secret = &cluster.SecretRef{Namespace: key.Namespace, Name: key.Name, Key: clustersv1alpha1.SecretKeyKubeconfig}
	return &out, nil
}

// write creates or updates the Secret; it reads first, so that a restart rewrites
// nothing that is current.
func (s *kubeconfigSecrets) write(ctx context.Context, key client.ObjectKey, purpose string, kubeconfig []byte) error {
	sec := &corev1.Secret{}
	err := s.client.Get(ctx, key, sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: s.labels(purpose)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{clustersv1alpha1.SecretKeyKubeconfig: kubeconfig},
		}
		if err := s.client.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating kubeconfig Secret %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading kubeconfig Secret %s: %w", key, err)
	}
	if bytes.Equal(sec.Data[clustersv1alpha1.SecretKeyKubeconfig], kubeconfig) {
		return nil
	}
	sec.Data = map[string][]byte{clustersv1alpha1.SecretKeyKubeconfig: kubeconfig}
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	for k, v := range s.labels(purpose) {
		sec.Labels[k] = v
	}
	if err := s.client.Update(ctx, sec); err != nil {
		return fmt.Errorf("renewing kubeconfig Secret %s: %w", key, err)
	}
	return nil
}

func (s *kubeconfigSecrets) labels(purpose string) map[string]string {
	return map[string]string{openmcpconst.ManagedByLabel: s.provider, openmcpconst.ManagedPurposeLabel: purpose}
}

// remove deletes the tenant's Secrets; the tokens in them are revoked with the
// tenant's end-user access right after.
func (s *kubeconfigSecrets) remove(ctx context.Context, namespace string) error {
	if s == nil {
		return nil
	}
	for _, purpose := range []string{secretPurposeMCP, secretPurposeWorker} {
		key := client.ObjectKey{Namespace: namespace, Name: s.name(purpose)}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := s.client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing kubeconfig Secret %s: %w", key, err)
		}
		s.mu.Lock()
		delete(s.written, key.String())
		s.mu.Unlock()
	}
	return nil
}
