package kcpmode

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestChecks walks kcp mode's readiness through the states without a running kcp
// manager (those with one are covered by test/e2e-kcp's TestOperations), and its
// liveness through a pass that takes long and one that is wedged.
func TestChecks(t *testing.T) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Name: "checks-test"})
	if err := s.Readyz(req); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("before Run: %v", err)
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := s.Readyz(req); err == nil || !strings.Contains(err.Error(), "not read the ProviderConfig") {
		t.Errorf("before the first pass: %v", err)
	}
	s.mu.Lock()
	s.read = true
	s.mu.Unlock()
	if err := s.Readyz(req); err != nil {
		t.Errorf("spec.kcp not set: %v", err)
	}
	s.mu.Lock()
	s.wanted = true
	s.mu.Unlock()
	if err := s.Readyz(req); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Errorf("spec.kcp set, not running: %v", err)
	}
	s.setErr(errors.New(`kcp kubeconfig Secret default/kcp: secrets "kcp" not found`))
	if err := s.Readyz(req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("start failed: %v", err)
	}

	if err := s.Healthz(req); err != nil {
		t.Errorf("between passes: %v", err)
	}
	s.setPass(time.Now().Add(-time.Minute))
	if err := s.Healthz(req); err != nil {
		t.Errorf("a pass of a minute: %v", err)
	}
	s.setPass(time.Now().Add(-2 * wedgedPass))
	if err := s.Healthz(req); err == nil || !strings.Contains(err.Error(), "starting or stopping") {
		t.Errorf("a wedged pass: %v", err)
	}
}
