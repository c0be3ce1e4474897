package e2ebinary

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// TestLocal is the README's promise: `make run` (here the built binary's `local`)
// starts a platform, the quickstart's commands, run word by word in a shell, end with a
// Ready Echo in a kcp workspace and on the onboarding cluster and their workers on the
// workload cluster, and Ctrl-C stops every process and leaves no file outside the
// state folder.
func TestLocal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := buildBinary(t, localMain)
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	state, home, tmp := filepath.Join(base, "state"), filepath.Join(base, "home"), filepath.Join(base, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A user's environment with nothing in it: whatever local or the quickstart writes
	// outside the state folder would show up in home or tmp.
	userEnv := []string{"HOME=" + home, "TMPDIR=" + tmp, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"), "KUBECONFIG="}

	// As after `make run` on a machine that built the servers once: no KSP_TEST_ASSETS,
	// local finds them in the cache (internal/testservers).
	assets, err := localenv.FindAssets(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	localEnv := append(slices.Clone(userEnv), localenv.AssetsEnv+"=", "KSP_CACHE_DIR="+filepath.Dir(filepath.Dir(assets)))

	// kcp's log is in the state folder, which the test removes: on a failure its tail
	// says whether kcp ended and why.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of kcp's log:\n%s", localenv.LogTail(filepath.Join(state, "logs", "kcp.log"), 60))
		}
	})
	start := time.Now()
	local := startProc(t, "local", bin, []string{"local", "--state-dir=" + state, "--repo-root=" + repo}, localEnv)
	banner := waitFor(ctx, t, local, "Press Ctrl-C", 10*time.Minute)
	t.Logf("local platform up in %s", time.Since(start).Round(100*time.Millisecond))

	kcpBlock, workersBlock, standardBlock := readmeBlock(t, "quickstart-tenant"), readmeBlock(t, "quickstart-workers"), readmeBlock(t, "quickstart-standard")
	// The README names the default state folder; this test uses its own.
	subst := func(block string) string {
		return strings.ReplaceAll(block, "$PWD/.local-platform", state)
	}
	t.Run("local prints the README's commands", func(t *testing.T) {
		for _, block := range []string{kcpBlock, workersBlock, standardBlock} {
			for _, line := range strings.Split(subst(block), "\n") {
				if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if !strings.Contains(banner, "  "+line+"\n") {
					t.Errorf("local does not print the README's line\n  %s\nit printed:\n%s", line, banner)
				}
			}
		}
	})

	t.Run("the README quickstart ends with Ready Echoes and their workers", func(t *testing.T) {
		// Each block runs in a fresh shell, as a user would paste it; the later ones
		// rely on the kcp block's first line (PATH with kubectl, KUBECACHEDIR).
		exports := firstLine(kcpBlock)
		for _, step := range []struct{ name, script string }{
			{"kcp tenant", kcpBlock},
			{"standard tenant", exports + "\n" + standardBlock},
			{"workers", exports + "\n" + workersBlock},
		} {
			start := time.Now()
			out := shell(ctx, t, repo, userEnv, subst(step.script))
			t.Logf("%s block in %s:\n%s", step.name, time.Since(start).Round(100*time.Millisecond), out)
			if step.name == "workers" {
				if n := strings.Count(out, "echo-worker"); n != 2 {
					t.Errorf("%d worker Deployments listed, want the kcp tenant's and the ControlPlane's", n)
				}
			} else if !strings.Contains(out, "condition met") {
				t.Errorf("no Ready Echo")
			}
		}
	})

	t.Run("Ctrl-C stops every process and leaves no file outside the state folder", func(t *testing.T) {
		stopLocal(t, local, state)
		for _, d := range []string{home, tmp} {
			if files := filesUnder(t, d); len(files) > 0 {
				t.Errorf("files written outside the state folder: %v", files)
			}
		}
		// The pods of the operator's init Job and run Deployment (named by its
		// ReplicaSet: sp-echo-<pod template hash>-<suffix>), and kcp.
		for _, pattern := range []string{"logs/pod-openmcp-system-sp-echo-init-*.log", "logs/pod-openmcp-system-sp-echo-*-?????.log", "logs/kcp.log"} {
			m, _ := filepath.Glob(filepath.Join(state, pattern))
			if strings.Contains(pattern, "*-?????") {
				m = slices.DeleteFunc(m, func(f string) bool { return strings.Contains(f, "-init-") })
			}
			if len(m) == 0 {
				t.Errorf("state folder lacks %s", pattern)
			}
		}
		// The servers' data is removed; only the logs stay.
		entries, err := os.ReadDir(state)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "logs" && !strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s left in the state folder after Ctrl-C", e.Name())
			}
		}
	})
}

// waitFor waits until p's output contains marker and returns the output.
// stopLocal presses Ctrl-C on a running local command and checks that it stops within
// two minutes, cleanly, leaving no process that names its state folder.
func stopLocal(t *testing.T, local *harness.Process, state string) {
	t.Helper()
	if local.Exited() {
		t.Fatalf("local exited by itself: %v", local.Err())
	}
	start := time.Now()
	if err := local.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-local.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("local did not stop within 2 minutes of Ctrl-C")
	}
	if local.Err() != nil {
		t.Errorf("local exited with %v:\n%s", local.Err(), local.Tail(20))
	}
	t.Logf("local stopped %s after Ctrl-C", time.Since(start).Round(100*time.Millisecond))
	if left := processesMentioning(t, state); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

func waitFor(ctx context.Context, t *testing.T, p *harness.Process, marker string, timeout time.Duration) string {
	t.Helper()
	var out string
	harness.Eventually(ctx, t, timeout, "local printing "+strconv.Quote(marker), func(context.Context) error {
		raw, _ := os.ReadFile(p.Log)
		out = string(raw)
		if p.Exited() {
			t.Fatalf("local exited: %v\n%s", p.Err(), out)
		}
		if !strings.Contains(out, marker) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return out
}

// readmeBlock returns the shell block following <!-- name --> in the README.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "<!-- "+name)
	if !ok {
		t.Fatalf("README has no <!-- %s --> block", name)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("README: no ```sh block after <!-- %s -->", name)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("README: unterminated block after <!-- %s -->", name)
	}
	return strings.TrimSpace(block)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// shell runs script in bash (errexit, pipefail) in dir and returns its output.
func shell(ctx context.Context, t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = localenv.MergeEnv(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v running\n%s\noutput:\n%s", err, script, out.String())
	}
	return out.String()
}

// processesMentioning lists running processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if cmdline := strings.ReplaceAll(string(raw), "\x00", " "); strings.Contains(cmdline, s) {
			out = append(out, e.Name()+": "+cmdline)
		}
	}
	return out
}

// filesUnder lists the files below dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	return out
}
