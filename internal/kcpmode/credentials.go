package kcpmode

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/kubeconfig"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// directTokenTTL is the lifetime of the runtime's own direct-call token; it is renewed
// at 80 %.
const directTokenTTL = time.Hour

// splitCredentials returns the credentials for virtual-workspace calls and for direct
// calls (TokenRequests in tenant workspaces). They must differ, or a kcp token-cache
// bug lends direct calls the virtual workspace's warrant
// (docs/design/tenant-credentials.md).
//
// When the kubeconfig is a ServiceAccount of the provider workspace (the production
// shape), the virtual workspace keeps it and direct calls get a second token of the
// same ServiceAccount, minted here and renewed until ctx ends. Any other identity (a
// user certificate, as in a development kcp) is used for both: it cannot mint a
// second credential of itself, and is reported in the log.
func splitCredentials(ctx context.Context, base *rest.Config, workspace, provider string) (vw, direct *rest.Config, id tokens.Identity, err error) {
	id, err = tokens.DetectIdentity(ctx, clusterConfig(base, workspace))
	if err != nil {
		return nil, nil, id, err
	}
	if !id.IsServiceAccount {
		log.FromContext(ctx).Info("kcp identity is not a ServiceAccount; using one credential for virtual workspace and direct calls", "user", id.Username)
		return base, rest.CopyConfig(base), id, nil
	}
	parts := strings.Split(strings.TrimPrefix(id.Username, "system:serviceaccount:"), ":")
	if len(parts) != 2 {
		return nil, nil, id, fmt.Errorf("unexpected ServiceAccount username %q", id.Username)
	}
	src := &selfToken{cfg: clusterConfig(base, workspace), namespace: parts[0], name: parts[1], provider: provider}
	if err := src.refresh(ctx); err != nil {
		return nil, nil, id, fmt.Errorf("minting the runtime's direct-call token (needs create on serviceaccounts/token for itself in %s): %w", workspace, err)
	}
	go src.renew(ctx)

	direct = rest.AnonymousClientConfig(base)
	direct.QPS, direct.Burst = base.QPS, base.Burst
	direct.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+src.current())
			return rt.RoundTrip(req)
		})
	})
	return base, direct, id, nil
}

// selfToken is a token of the runtime's own ServiceAccount, kept fresh.
type selfToken struct {
	cfg             *rest.Config
	namespace, name string
	provider        string // metrics label

	mu      sync.RWMutex
	token   string
	renewAt time.Time
}

func (s *selfToken) current() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.token
}

// refresh mints a new token and records the outcome in the metrics (the refresh
// count and the expiry, which alert rules watch).
func (s *selfToken) refresh(ctx context.Context) error {
	expires, err := s.mint(ctx)
	metrics.RuntimeTokenRefreshed(s.provider, expires, err)
	return err
}

func (s *selfToken) mint(ctx context.Context) (time.Time, error) {
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return time.Time{}, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, s.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(directTokenTTL.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	s.token = tr.Status.Token
	s.renewAt = kubeconfig.RenewAt(time.Now(), tr.Status.ExpirationTimestamp.Time)
	s.mu.Unlock()
	return tr.Status.ExpirationTimestamp.Time, nil
}

func (s *selfToken) renew(ctx context.Context) {
	for {
		s.mu.RLock()
		wait := time.Until(s.renewAt)
		s.mu.RUnlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := s.refresh(ctx); err != nil {
			log.FromContext(ctx).Error(err, "renewing the runtime's direct-call token; retrying in 30s")
			s.mu.Lock()
			s.renewAt = time.Now().Add(30 * time.Second)
			s.mu.Unlock()
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
