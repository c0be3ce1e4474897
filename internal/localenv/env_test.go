package localenv

import (
	"os"
	"reflect"
	"testing"
)

// A re-executed Go program reads the first of duplicate variables, so overrides must
// replace, not follow, what the environment has.
func TestMergeEnv(t *testing.T) {
	got := MergeEnv([]string{"HOME=/root", "TMPDIR=/tmp", "PATH=/bin", "EMPTY="}, "TMPDIR=/state/tmp", "NEW=1", "EMPTY=x")
	want := []string{"HOME=/root", "PATH=/bin", "TMPDIR=/state/tmp", "NEW=1", "EMPTY=x"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeEnv = %q, want %q", got, want)
	}
}

// TestMain removes the run folders of test binaries that died before their cleanup,
// and this binary's own at the end.
func TestMain(m *testing.M) {
	SweepStaleRunDirs()
	code := m.Run()
	RemoveRunDir()
	os.Exit(code)
}

// newTestEnv is an Env in a scratch folder named name, stopped when the test ends.
func newTestEnv(t testing.TB, name string) *Env {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatalf("%v (run hack/test-binaries.sh)", err)
	}
	dir, err := ScratchDir(name)
	if err != nil {
		t.Fatal(err)
	}
	env, err := New(dir, assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}
