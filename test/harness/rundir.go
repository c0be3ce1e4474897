package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Every server's files (kcp root directory, etcd data, certificates, logs) live in
// one scratch folder per test binary, named after its process id:
//
//	$TMPDIR/ksp-harness/<pid>-<random>/
//
// t.Cleanup removes a server's files, and Main removes the folder. A binary killed by
// `go test -timeout` runs neither, and embedded etcd preallocates 64 MB of WAL per
// server; the next Main therefore removes the folders of processes that no longer exist.

var (
	runDirOnce sync.Once
	runDirPath string
	runDirErr  error
)

func runDirBase() string { return filepath.Join(os.TempDir(), "ksp-harness") }

// runDir returns this binary's scratch folder, creating it on first use.
func runDir() (string, error) {
	runDirOnce.Do(func() {
		base := runDirBase()
		if err := os.MkdirAll(base, 0o700); err != nil {
			runDirErr = fmt.Errorf("creating %s: %w", base, err)
			return
		}
		runDirPath, runDirErr = os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-")
		if runDirErr != nil {
			runDirErr = fmt.Errorf("creating scratch folder in %s: %w", base, runDirErr)
		}
	})
	return runDirPath, runDirErr
}

// scratchDir creates a fresh folder for one server in this binary's scratch folder.
// The caller removes it when the server stops.
func scratchDir(t testing.TB, prefix string) string {
	t.Helper()
	base, err := runDir()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	dir, err := os.MkdirTemp(base, prefix+"-")
	if err != nil {
		t.Fatalf("harness: creating scratch folder: %v", err)
	}
	return dir
}

// removeRunDir removes this binary's scratch folder if it was created.
func removeRunDir() {
	if runDirPath != "" {
		_ = os.RemoveAll(runDirPath)
	}
}

// sweepStaleRunDirs removes the scratch folders of test binaries that have exited.
// Folders of running binaries (other packages tested in parallel) are left alone.
func sweepStaleRunDirs() {
	entries, err := os.ReadDir(runDirBase())
	if err != nil {
		return
	}
	for _, e := range entries {
		pidText, _, ok := strings.Cut(e.Name(), "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		// Signal 0 checks for existence; EPERM means the process exists but
		// belongs to someone else.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(runDirBase(), e.Name()))
		}
	}
}
