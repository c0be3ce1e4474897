package bearer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestRequest builds the TokenRequest of the lifetime asked for and reads its answer.
func TestRequest(t *testing.T) {
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	tok, err := Request(t.Context(), time.Hour, func(_ context.Context, tr *authenticationv1.TokenRequest) error {
		if tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != 3600 {
			t.Errorf("ExpirationSeconds %v, want 3600", tr.Spec.ExpirationSeconds)
		}
		tr.Status = authenticationv1.TokenRequestStatus{Token: "t1", ExpirationTimestamp: metav1.NewTime(expires)}
		return nil
	})
	if err != nil || tok.Value != "t1" || !tok.Expires.Equal(expires) || tok.Issued.IsZero() {
		t.Fatalf("token %+v, %v", tok, err)
	}
	if at := tok.RenewAt(); !at.After(tok.Issued) || !at.Before(expires) {
		t.Errorf("RenewAt %s not between issue and expiry", at)
	}
	if _, err := Request(t.Context(), time.Hour, func(context.Context, *authenticationv1.TokenRequest) error { return nil }); err == nil {
		t.Error("an answer without a token is not an error")
	}
}

// TestHolderRenewsAndKeepsTheTokenOnFailure: the held token reaches every request of
// a config built once; a failed renewal keeps it, the next success replaces it.
func TestHolderRenewsAndKeepsTheTokenOnFailure(t *testing.T) {
	var mu sync.Mutex
	answers := []struct {
		token string
		err   error
	}{{"first", nil}, {"", errors.New("platform down")}, {"second", nil}}
	fetches := 0
	h := New(func(context.Context) (Token, error) {
		mu.Lock()
		defer mu.Unlock()
		a := answers[min(fetches, len(answers)-1)]
		fetches++
		return Token{Value: a.token}, a.err
	}, Options{Poll: 10 * time.Millisecond, Retry: 10 * time.Millisecond, Log: logr.Discard()})
	if err := h.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	cfg := h.Config(&rest.Config{Host: srv.URL, BearerToken: "the base's own"})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		t.Helper()
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return <-seen
	}
	if got := get(); got != "Bearer first" {
		t.Fatalf("Authorization %q, want the held token", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go h.Renew(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for h.Current().Value != "second" {
		if time.Now().After(deadline) {
			t.Fatalf("token %q after renewals, want second", h.Current().Value)
		}
		if v := h.Current().Value; v != "first" && v != "second" {
			t.Fatalf("token %q: a failed renewal replaced the held token", v)
		}
		time.Sleep(time.Millisecond)
	}
	if got := get(); got != "Bearer second" {
		t.Errorf("Authorization %q after the renewal, want the new token", got)
	}
}
