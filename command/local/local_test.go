package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/command"
)

// TestHelp: local documents its flags and exits 0 on --help.
func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := command.Execute("kcp-serviceprovider", []string{"local", "--help"}, &out, &errOut, Command(command.Provider{Name: "echo"})); code != 0 {
		t.Fatalf("local --help exited %d: %s", code, errOut.String())
	}
	for _, f := range []string{"state-dir", "repo-root", "kcp-shards"} {
		if !strings.Contains(out.String(), "  -"+f) {
			t.Errorf("local --help lacks %s", f)
		}
	}
}

// local empties its state folder at start, but never a folder it did not write.
func TestResetStateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(dir); err == nil {
		t.Fatal("a foreign non-empty folder was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatalf("a foreign file was touched: %v", err)
	}

	state := filepath.Join(t.TempDir(), "state")
	if err := resetStateDir(state); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "kcp", "root"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(state); err != nil {
		t.Fatalf("emptying its own folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "kcp")); !os.IsNotExist(err) {
		t.Errorf("old state survived: %v", err)
	}
}

// Two local platforms must not share a state folder: the second would delete the
// first one's servers' data from under it.
func TestResetStateDirInUse(t *testing.T) {
	state := t.TempDir()
	// A process that surely runs: this test's parent.
	if err := os.WriteFile(filepath.Join(state, stateMarker), []byte(strconv.Itoa(os.Getppid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(state); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("resetStateDir = %v, want in use", err)
	}
}
