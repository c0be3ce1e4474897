package localenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Callers without a folder of their own (tests, the benchmark) put each Env into a
// scratch folder of their process's run folder, named after its process id:
//
//	$TMPDIR/ksp-harness/<pid>-<random>/<prefix>-<random>/
//
// They remove an Env's folder after its Stop, and the run folder at exit. A process
// killed (say by `go test -timeout`) does neither, and embedded etcd preallocates
// 64 MB of WAL per server; SweepStaleRunDirs therefore removes the run folders of
// processes that no longer exist.

var (
	runDirOnce sync.Once
	runDirPath string
	runDirErr  error
)

func runDirBase() string { return filepath.Join(os.TempDir(), "ksp-harness") }

// RunDir returns this process's run folder, creating it on first use.
func RunDir() (string, error) {
	runDirOnce.Do(func() {
		base := runDirBase()
		if err := os.MkdirAll(base, 0o700); err != nil {
			runDirErr = fmt.Errorf("creating %s: %w", base, err)
			return
		}
		runDirPath, runDirErr = os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-")
		if runDirErr != nil {
			runDirErr = fmt.Errorf("creating the run folder in %s: %w", base, runDirErr)
		}
	})
	return runDirPath, runDirErr
}

// ScratchDir creates a fresh folder in this process's run folder. The caller removes
// it when done.
func ScratchDir(prefix string) (string, error) {
	base, err := RunDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, prefix+"-")
	if err != nil {
		return "", fmt.Errorf("creating a scratch folder: %w", err)
	}
	return dir, nil
}

// RemoveRunDir removes this process's run folder if it was created.
func RemoveRunDir() {
	if runDirPath != "" {
		_ = os.RemoveAll(runDirPath)
	}
}

// SweepStaleRunDirs removes the run folders of processes that have exited. Folders of
// running processes (other test binaries run in parallel) are left alone.
func SweepStaleRunDirs() {
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
		// Signal 0 checks for existence; EPERM means the process exists but belongs
		// to someone else.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(runDirBase(), e.Name()))
		}
	}
}
