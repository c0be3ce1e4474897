package bearer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// Token is a bearer token and its lifetime.
type Token struct {
	Value string
	// Issued is when it was asked for; Expires when it stops working. Both are zero
	// when the source does not say (a token read from a Secret).
	Issued, Expires time.Time
}

// RenewAt is when t is due for renewal (kubeconfig.RenewAt); zero when its expiry is
// unknown.
func (t Token) RenewAt() time.Time { return kubeconfig.RenewAt(t.Issued, t.Expires) }

// Request mints a token with a TokenRequest of ttl. create sends the request over the
// caller's transport (a clientset, a REST client of a kcp workspace, a
// controller-runtime client) and fills in its status.
func Request(ctx context.Context, ttl time.Duration, create func(context.Context, *authenticationv1.TokenRequest) error) (Token, error) {
	seconds := int64(ttl / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	issued := time.Now()
	if err := create(ctx, tr); err != nil {
		return Token{}, err
	}
	if tr.Status.Token == "" {
		return Token{}, errors.New("the TokenRequest returned no token")
	}
	return Token{Value: tr.Status.Token, Issued: issued, Expires: tr.Status.ExpirationTimestamp.Time}, nil
}

// Options configure a Holder.
type Options struct {
	// Poll is how often a token without a known expiry is fetched again. Default: 1 min.
	Poll time.Duration
	// Retry is how soon a failed renewal is tried again; the old token, which usually
	// has a fifth of its lifetime left, is kept meanwhile. Default: 30 s.
	Retry time.Duration
	// Observe, if set, is told the outcome of every fetch (for metrics).
	Observe func(Token, error)
	// Log tells of failed renewals; what is renewed is named by the caller's logger.
	Log logr.Logger
}

// Holder keeps the current token of a source.
type Holder struct {
	fetch func(context.Context) (Token, error)
	opts  Options

	mu  sync.RWMutex
	tok Token
}

// New returns a Holder of the tokens fetch returns; Refresh fetches the first.
func New(fetch func(context.Context) (Token, error), opts Options) *Holder {
	if opts.Poll <= 0 {
		opts.Poll = time.Minute
	}
	if opts.Retry <= 0 {
		opts.Retry = 30 * time.Second
	}
	return &Holder{fetch: fetch, opts: opts}
}

// Current is the token held now.
func (h *Holder) Current() Token {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.tok
}

// Refresh fetches a token now; on failure the held one stays.
func (h *Holder) Refresh(ctx context.Context) error {
	t, err := h.fetch(ctx)
	if h.opts.Observe != nil {
		h.opts.Observe(t, err)
	}
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.tok = t
	h.mu.Unlock()
	return nil
}

// Renew keeps the token fresh until ctx ends: at its renewal time (or every Poll when
// its expiry is unknown), and Retry after a failure.
func (h *Holder) Renew(ctx context.Context) {
	next := h.next()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		if err := h.Refresh(ctx); err != nil {
			if ctx.Err() == nil {
				h.opts.Log.Error(err, "renewing a token; keeping the current one", "retryIn", h.opts.Retry)
			}
			next = time.Now().Add(h.opts.Retry)
			continue
		}
		next = h.next()
	}
}

func (h *Holder) next() time.Time {
	if at := h.Current().RenewAt(); !at.IsZero() {
		return at
	}
	return time.Now().Add(h.opts.Poll)
}

// Config is base without its credentials, every request of which carries the held
// token: a renewal applies to clients already built from it.
func (h *Holder) Config(base *rest.Config) *rest.Config {
	cfg := rest.AnonymousClientConfig(base) // keeps QPS, Burst and RateLimiter
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+h.Current().Value)
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// String never prints the token.
func (h *Holder) String() string {
	t := h.Current()
	return fmt.Sprintf("bearer token (expires %s)", t.Expires.Format(time.RFC3339))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
