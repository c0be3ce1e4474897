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
	main bool // Main is running the tests
	kcps map[string]*sharedKCP
}{kcps: map[string]*sharedKCP{}}

type sharedKCP struct {
	once sync.Once
	env  *localenv.Env
	dir  string
	kcp  *KCP
	err  error
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
	key := fmt.Sprintf("%+v", o)
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		t.Fatal("SharedKCP: the package's TestMain must call harness.Main, which stops the shared servers")
	}
	s := shared.kcps[key]
	if s == nil {
		s = &sharedKCP{}
		shared.kcps[key] = s
	}
	shared.Unlock()
	s.once.Do(func() { s.start(t, o) })
	if s.err != nil {
		t.Fatalf("the shared kcp did not start: %v", s.err)
	}
	// A failing test shows the end of the shared server's log, which it shares
	// with the others.
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range s.env.Logs() {
				logTail(t, log)
			}
		}
	})
	return s.kcp
}

func (s *sharedKCP) start(t testing.TB, o localenv.KCPOptions) {
	assets, err := localenv.AssetsDir()
	if err != nil {
		s.err = fmt.Errorf("test binaries missing (%w): %s", err, missingHint)
		return
	}
	if s.dir, err = localenv.ScratchDir("shared-kcp"); err != nil {
		s.err = err
		return
	}
	if s.env, err = localenv.New(s.dir, assets); err != nil {
		s.err = err
		return
	}
	start := time.Now()
	k, err := s.env.StartKCP(context.Background(), o)
	if err != nil {
		s.err = err
		return
	}
	s.kcp = &KCP{k}
	t.Logf("shared kcp ready at %s after %s (started by %s)", k.URL(), time.Since(start).Round(100*time.Millisecond), t.Name())
}

// stopShared stops the shared servers; Main calls it after the tests.
func stopShared() {
	shared.Lock()
	defer shared.Unlock()
	for _, s := range shared.kcps {
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "harness: stopping the shared kcp: %v\n", err)
			}
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	}
	shared.kcps = map[string]*sharedKCP{}
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
