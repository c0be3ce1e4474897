package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AssetsEnv names the environment variable holding the folder with the test binaries
// (kcp, kube-apiserver, etcd, kubectl), as printed by hack/test-binaries.sh.
const AssetsEnv = "KSP_TEST_ASSETS"

// requiredBinaries are the executables every harness function may start.
var requiredBinaries = []string{"kcp", "kube-apiserver", "etcd", "kubectl"}

// missingHint tells a developer how to get the binaries. It is printed as is, so it
// has to work when pasted into a shell: the script prints KSP_TEST_ASSETS=<dir> as its
// only line on stdout, and export turns that into an environment variable.
const missingHint = `run 'make test' (or export "$(hack/test-binaries.sh)")`

// AssetsDir returns the folder named by KSP_TEST_ASSETS after checking that it holds
// every binary the harness starts. The error says which ones are missing.
func AssetsDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set", AssetsEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s=%q: %w", AssetsEnv, dir, err)
	}
	var missing []string
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(abs, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s=%s lacks %s", AssetsEnv, abs, strings.Join(missing, ", "))
	}
	return abs, nil
}

// Main is the TestMain of every package using the harness:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// Without the binaries it prints one line saying how to get them and exits 1, rather
// than letting every test fail with a stack of start-up errors. Otherwise it removes
// files left behind by test binaries that died without cleaning up, runs the tests
// and removes this binary's scratch folder.
func Main(m *testing.M) {
	if _, err := AssetsDir(); err != nil {
		fmt.Fprintf(os.Stderr, "test binaries missing (%v): %s\n", err, missingHint)
		os.Exit(1)
	}
	sweepStaleRunDirs()
	code := m.Run()
	removeRunDir()
	os.Exit(code)
}

// assetsDir is AssetsDir for helpers: it fails the test instead of returning an error.
func assetsDir(t testing.TB) string {
	t.Helper()
	dir, err := AssetsDir()
	if err != nil {
		t.Fatalf("test binaries missing (%v): %s", err, missingHint)
	}
	return dir
}
