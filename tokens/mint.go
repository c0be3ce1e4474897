package tokens

import (
	"context"
	"fmt"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openmcp-project/kcp-serviceprovider/internal/bearer"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// mint requests a token directly from kcp. Right after the Minter wrote RBAC, kcp's
// authorizer may not see it yet: then a refusal is retried until PropagationTimeout.
func (m *Minter) mint(ctx context.Context, cluster logicalcluster.Name, fresh bool) (*Credential, error) {
	sa := m.opts.ServiceAccount
	var tok bearer.Token
	issued := m.opts.Clock.Now()
	request := func(ctx context.Context) error {
		issued = m.opts.Clock.Now()
		var err error
		tok, err = bearer.Request(ctx, m.opts.TTL, func(ctx context.Context, tr *authenticationv1.TokenRequest) error {
			return m.rest.Post().
				AbsPath("/clusters", cluster.String(), "api/v1/namespaces", sa.Namespace, "serviceaccounts", sa.Name, "token").
				Body(tr).Do(ctx).Into(tr)
		})
		return err
	}
	err := request(ctx)
	if err != nil && fresh && (apierrors.IsForbidden(err) || apierrors.IsNotFound(err)) {
		last := err
		// Back off from 100 ms, so a fast kcp answers quickly and a refusal that
		// persists costs about ten requests. The requests use ctx, not the wait's
		// deadline: a request cut short by it would hide kcp's last answer, which
		// decides the fallback.
		waitCtx, cancel := context.WithTimeout(ctx, m.opts.PropagationTimeout)
		defer cancel()
		backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 30}
		perr := wait.ExponentialBackoffWithContext(waitCtx, backoff, func(context.Context) (bool, error) {
			last = request(ctx)
			switch {
			case last == nil:
				return true, nil
			case apierrors.IsForbidden(last) || apierrors.IsNotFound(last):
				return false, nil
			default:
				return false, last
			}
		})
		err = last
		if perr != nil && last == nil {
			err = perr
		}
	}
	if err != nil {
		return nil, &tokenRequestError{sa: sa, err: err}
	}
	expires := tok.Expires
	server := m.base + logicalcluster.NewPath(cluster.String()).RequestPath()
	kc, cfg, err := render(m.opts.Direct, server, cluster.String(), tok.Value)
	if err != nil {
		return nil, err
	}
	return &Credential{
		Cluster:    cluster,
		Token:      tok.Value,
		Kubeconfig: kc,
		ExpiresAt:  expires,
		RenewAt:    kubeconfig.RenewAt(issued, expires),
		config:     cfg,
	}, nil
}

// tokenRequestError is a failed TokenRequest, told apart from failures of the virtual
// workspace writes before it.
type tokenRequestError struct {
	sa  types.NamespacedName
	err error
}

func (e *tokenRequestError) Error() string {
	return fmt.Sprintf("requesting a token for ServiceAccount %s: %v", e.sa, e.err)
}

func (e *tokenRequestError) Unwrap() error { return e.err }
