package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/testservers"
)

// missingHint tells a developer how to get the binaries. It is printed as is, so it
// has to work when pasted into a shell, in this repository and in a provider's own
// module: the command prints KSP_TEST_ASSETS=<dir> as its last line, and export turns
// that into an environment variable.
const missingHint = `build them first with: eval "export $(go run github.com/openmcp-project/kcp-serviceprovider/cmd/kcp-serviceprovider-servers | tail -1)"`

// buildTimeout is the least test timeout under which Main builds missing servers
// itself: a cold build takes 20 to 40 minutes on two cores, and go test's default
// timeout (10 minutes) would stop it half way.
const buildTimeout = time.Hour

// Main is the TestMain of every package using the harness:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// Without KSP_TEST_ASSETS it finds the servers in the cache (internal/testservers); if
// they were never built, it builds them when the test timeout allows (go test -timeout
// 60m, or 0), and otherwise prints one line saying how, rather than letting every test
// fail with a stack of start-up errors. Then it removes files left behind by test
// binaries that died without cleaning up, runs the tests, stops the servers they
// shared (SharedKCP) and removes this binary's scratch folder.
func Main(m *testing.M) {
	if err := findAssets(); err != nil {
		fmt.Fprintf(os.Stderr, "test binaries missing (%v): %s\n", err, missingHint)
		os.Exit(1)
	}
	localenv.SweepStaleRunDirs()
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	if !stopShared() && code == 0 {
		code = 1
	}
	localenv.RemoveRunDir()
	os.Exit(code)
}

// findAssets sets KSP_TEST_ASSETS when it is not set: to the servers in the cache,
// built first if the test timeout leaves the time.
func findAssets() error {
	if os.Getenv(localenv.AssetsEnv) != "" {
		_, err := localenv.AssetsDir()
		return err
	}
	dir, ok, err := testservers.Find(testservers.Options{})
	if err != nil {
		return err
	}
	if !ok {
		if !flag.Parsed() {
			flag.Parse()
		}
		timeout := time.Duration(0)
		if f := flag.Lookup("test.timeout"); f != nil {
			if g, isGetter := f.Value.(flag.Getter); isGetter {
				timeout, _ = g.Get().(time.Duration)
			}
		}
		if timeout != 0 && timeout < buildTimeout {
			return fmt.Errorf("%s is not set and the servers are not built yet; go test -timeout 60m builds them on first use", localenv.AssetsEnv)
		}
		if dir, err = testservers.Ensure(context.Background(), testservers.Options{}); err != nil {
			return err
		}
	}
	if err := os.Setenv(localenv.AssetsEnv, dir); err != nil {
		return err
	}
	_, err = localenv.AssetsDir()
	return err
}

// NewEnv returns a localenv.Env of its own for the test, in a fresh scratch folder.
// t.Cleanup stops what it started and removes its files; if the test failed, the tail
// of every log is printed first.
func NewEnv(t testing.TB, name string) *localenv.Env {
	t.Helper()
	assets, err := localenv.AssetsDir()
	if err != nil {
		t.Fatalf("test binaries missing (%v): %s", err, missingHint)
	}
	dir, err := localenv.ScratchDir(name)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	env, err := localenv.New(dir, assets)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range env.Logs() {
				logTail(t, log)
			}
		}
		if err := env.Stop(); err != nil {
			t.Errorf("harness: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return env
}

// logTail prints the end of a log file to the test output.
func logTail(t testing.TB, path string) {
	t.Helper()
	const maxBytes, maxLines = 16 << 10, 60
	f, err := os.Open(path)
	if err != nil {
		t.Logf("no log %s: %v", path, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Logf("reading %s: %v", path, err)
		return
	}
	offset := max(fi.Size()-maxBytes, 0)
	buf := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("reading %s: %v", path, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if offset > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	t.Logf("last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
}
