package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// Servers shared by the tests of one test binary, as kcp's own e2e suite shares one
// kcp: starting kcp costs seconds of both cores, a test's own workspaces cost a
// fraction of one. The first test that asks starts a server; Main stops every one
// after the last test.
var shared = struct {
	sync.Mutex
	main    bool // Main is running the tests
	servers map[string]*sharedServers
}{servers: map[string]*sharedServers{}}

// sharedServers are the servers of one key (a kcp's options, a platform's name) in an
// Env of their own.
type sharedServers struct {
	once sync.Once
	env  *localenv.Env
	dir  string
	err  error

	kcp      *KCP
	platform *Platform
	// operator is the shared platform's openmcp-operator, checked for backoff when
	// the servers stop; failed is the local platform's error, if it stopped.
	operator *localenv.Operator
	failed   atomic.Pointer[error]
}

// sharedFor returns the servers of key, started by start in the first test that asks.
func sharedFor(t testing.TB, what, key string, start func(s *sharedServers) error) *sharedServers {
	t.Helper()
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		t.Fatalf("a shared %s: the package's TestMain must call harness.Main, which stops the shared servers", what)
	}
	s := shared.servers[key]
	if s == nil {
		s = &sharedServers{}
		shared.servers[key] = s
	}
	shared.Unlock()
	s.once.Do(func() {
		assets, err := localenv.AssetsDir()
		if err != nil {
			s.err = fmt.Errorf("test binaries missing (%w): %s", err, missingHint)
			return
		}
		if s.dir, s.err = localenv.ScratchDir("shared-" + strings.ReplaceAll(what, " ", "-")); s.err != nil {
			return
		}
		if s.env, s.err = localenv.New(s.dir, assets); s.err != nil {
			return
		}
		began := time.Now()
		if s.err = start(s); s.err == nil {
			t.Logf("shared %s ready after %s (started by %s)", what, time.Since(began).Round(100*time.Millisecond), t.Name())
		}
	})
	if s.err != nil {
		t.Fatalf("the shared %s did not start: %v", what, s.err)
	}
	// A failing test shows the end of the shared servers' logs, which it shares
	// with the others.
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range s.env.Logs() {
				logTail(t, log)
			}
		}
	})
	return s
}

// SharedKCP returns the test binary's kcp started with these options: the first test
// that asks starts it, every later one gets the same server, and Main stops it after
// the last test. A test on a shared kcp works in workspaces of its own (OwnWorkspace),
// so that tests can run in parallel and none sees another's leftovers; a test that
// stops, restarts or reconfigures kcp starts one of its own with StartKCP instead.
// The package's TestMain must call Main.
func SharedKCP(t testing.TB, opts ...KCPOption) *KCP {
	t.Helper()
	var o localenv.KCPOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := sharedFor(t, "kcp", fmt.Sprintf("kcp %+v", o), func(s *sharedServers) error {
		k, err := s.env.StartKCP(context.Background(), o)
		if err == nil {
			s.kcp = &KCP{k}
		}
		return err
	})
	return s.kcp
}

// SharedPlatform returns the test binary's local platform called name, started with
// opts by the first test that asks (later callers must ask for the same options) and
// stopped by Main after the last test. Each test on it prepares its own provider
// (Platform.PrepareProvider) under its own workspace (KCP.OwnWorkspace) and serves
// its own provider name, so that several runtimes share the servers side by side; a
// test that stops or breaks a server, or needs the platform to itself, starts one of
// its own with StartPlatform. The openmcp-operator is checked for requests put into
// its backoff when the platform stops, and a failure then fails the test binary. The
// package's TestMain must call Main.
func SharedPlatform(t testing.TB, name string, opts localenv.PlatformOptions) *Platform {
	t.Helper()
	if opts.Provider != nil {
		t.Fatal("SharedPlatform: each test prepares its own provider workspace (Platform.PrepareProvider), not the platform")
	}
	s := sharedFor(t, "platform "+name, "platform "+name, func(s *sharedServers) error {
		p, err := s.env.StartPlatform(context.Background(), opts)
		if err != nil {
			return err
		}
		s.platform, s.operator = wrapPlatform(t, p), p.Operator
		go func() {
			if err := <-p.Failed(); err != nil {
				s.failed.Store(&err)
			}
		}()
		return nil
	})
	t.Cleanup(func() {
		if err := s.failed.Load(); err != nil {
			t.Errorf("the shared platform %s: %v", name, *err)
		}
	})
	return s.platform
}

// stopShared stops the shared servers; Main calls it after the tests. It answers
// false if a shared platform's openmcp-operator put a request into its backoff.
func stopShared() bool {
	shared.Lock()
	defer shared.Unlock()
	ok := true
	for key, s := range shared.servers {
		if s.operator != nil {
			notes, err := operatorBackoff(s.operator)
			for _, n := range notes {
				fmt.Fprintf(os.Stderr, "harness: %s: %s\n", key, n)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "harness: FAIL: %s: %v\n", key, err)
				ok = false
			}
		}
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "harness: stopping the shared %s: %v\n", key, err)
			}
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	}
	shared.servers = map[string]*sharedServers{}
	return ok
}

// OwnWorkspace creates a workspace under root for the test alone, named after it with
// a random suffix, and returns its path and logical cluster: the parent of the test's
// own workspaces on a shared kcp.
func (k *KCP) OwnWorkspace(ctx context.Context, t testing.TB) (logicalcluster.Path, logicalcluster.Name) {
	t.Helper()
	return k.CreateWorkspace(ctx, t, logicalcluster.NewPath("root"), UniqueName(t))
}

var notInName = regexp.MustCompile(`[^a-z0-9]+`)

// UniqueName is a DNS label made of the test's name and a random suffix, for the
// objects a test creates on a server it shares with others.
func UniqueName(t testing.TB) string {
	base := strings.Trim(notInName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return base + "-" + hex.EncodeToString(b)
}
