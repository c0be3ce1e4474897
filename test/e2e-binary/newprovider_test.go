package e2ebinary

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// TestNewProvider is the acceptance test of cmd/kcp-serviceprovider-new, as an author
// starting a provider in a repository of their own lives it: the command writes a
// module in a folder outside this checkout, which requires this module (replaced by the
// checkout, standing in for a release) and nothing else replaced. In that module go vet
// passes, make generate leaves its generated files as they were, make test runs its
// end-to-end test in both modes, make run's local platform serves the tenant commands it
// prints until they report Ready, and make image writes an image. The module cannot
// import this one's internal packages, and go doc of testkit names none.
func TestNewProvider(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	if rel, err := filepath.Rel(repo, base); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the test's folder %s is inside the checkout %s", base, repo)
	}
	dir := filepath.Join(base, "backups")
	assets, err := localenv.FindAssets(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The author's shell: the servers are in the cache (make test finds them there).
	env := []string{localenv.AssetsEnv + "=", "KSP_CACHE_DIR=" + filepath.Dir(filepath.Dir(assets))}

	runIn(ctx, t, repo, env, 5*time.Minute, "go", "run", "./cmd/kcp-serviceprovider-new", "-replace", repo, "-dir", dir, "example.com/acme/backups")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(gomod), "=>"); n != 1 || !strings.Contains(string(gomod), "replace github.com/openmcp-project/kcp-serviceprovider => "+repo+"\n") {
		t.Errorf("go.mod replaces %d modules, want only the runtime by the checkout:\n%s", n, gomod)
	}

	t.Run("go vet", func(t *testing.T) {
		runIn(ctx, t, dir, env, 10*time.Minute, "go", "vet", "./...")
	})
	t.Run("make generate leaves the generated files as written", func(t *testing.T) {
		before := snapshot(t, dir)
		runIn(ctx, t, dir, env, 10*time.Minute, "make", "generate")
		after := snapshot(t, dir)
		for name, raw := range after {
			if !bytes.Equal(before[name], raw) {
				t.Errorf("make generate changed %s", name)
			}
		}
		if len(after) != len(before) {
			t.Errorf("make generate wrote %d files, the module held %d", len(after), len(before))
		}
	})
	t.Run("internal packages stay internal", func(t *testing.T) {
		probe := filepath.Join(dir, "probe")
		if err := os.MkdirAll(probe, 0o755); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.RemoveAll(probe) }()
		src := "package probe\n\nimport _ \"github.com/openmcp-project/kcp-serviceprovider/internal/localenv\"\n"
		if err := os.WriteFile(filepath.Join(probe, "probe.go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "go", "build", "./probe")
		cmd.Dir, cmd.Env = dir, localenv.MergeEnv(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "use of internal package") {
			t.Errorf("importing internal/localenv from the new module: %v\n%s", err, out)
		}
		doc := runIn(ctx, t, dir, env, 5*time.Minute, "go", "doc", "-all", "github.com/openmcp-project/kcp-serviceprovider/testkit")
		for _, internal := range []string{"internal/", "localenv.", "harness."} {
			if strings.Contains(doc, internal) {
				t.Errorf("go doc of testkit names %q:\n%s", internal, doc)
			}
		}
	})
	t.Run("make test runs the end-to-end test in both modes", func(t *testing.T) {
		out := runIn(ctx, t, dir, append(env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -v")), 30*time.Minute, "make", "test")
		for _, want := range []string{"--- PASS: TestBothModes/kcp", "--- PASS: TestBothModes/standard", "ok  \texample.com/acme/backups"} {
			if !strings.Contains(out, want) {
				t.Errorf("make test printed no %q:\n%s", want, tail(out, 60))
			}
		}
	})
	t.Run("make run serves the tenant commands it prints", func(t *testing.T) {
		bin := filepath.Join(base, "bin", "backups")
		runIn(ctx, t, dir, env, 10*time.Minute, "go", "build", "-o", bin, ".")
		state := filepath.Join(base, "state")
		local := startProc(t, "backups-local", bin, []string{"local", "--state-dir=" + state, "--repo-root=" + dir}, env)
		banner := waitFor(ctx, t, local, "Press Ctrl-C", 10*time.Minute)
		kcpBlock, standardBlock, workloadBlock := tenantBlocks(banner)
		if len(kcpBlock) == 0 || len(standardBlock) == 0 || len(workloadBlock) == 0 {
			t.Fatalf("local printed no tenant commands:\n%s", banner)
		}
		exports := kcpBlock[0]
		if out := shell(ctx, t, dir, env, strings.Join(kcpBlock, "\n")); !strings.Contains(out, "note.backups.services.open-control-plane.io/demo condition met") {
			t.Errorf("the kcp tenant's commands end with no Ready Note:\n%s", out)
		}
		if out := shell(ctx, t, dir, env, exports+"\n"+strings.Join(standardBlock, "\n")); !strings.Contains(out, "condition met") {
			t.Errorf("the standard tenant's commands end with no Ready Note:\n%s", out)
		}
		if out := shell(ctx, t, dir, env, exports+"\n"+strings.Join(workloadBlock, "\n")); strings.Count(out, " note ") != 2 {
			t.Errorf("the workload cluster holds %d note ConfigMaps, want the kcp tenant's and the ControlPlane's:\n%s", strings.Count(out, " note "), out)
		}
		stopLocal(t, local, state)
	})
	t.Run("make image", func(t *testing.T) {
		out := runIn(ctx, t, dir, env, 15*time.Minute, "make", "image")
		if !strings.Contains(out, "image: sha256:") {
			t.Errorf("make image printed no digest:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "dist", "image", "index.json")); err != nil {
			t.Errorf("the OCI layout: %v", err)
		}
	})
}

// runIn runs a command in dir with extra environment, fails the test when it fails, and
// returns its output.
func runIn(ctx context.Context, t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, localenv.MergeEnv(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nits failures:\n%s\nits last lines:\n%s", name, strings.Join(args, " "), err, failures(out.String()), tail(out.String(), 60))
	}
	t.Logf("%s %s took %s", name, strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return out.String()
}

// tenantBlocks are the commands local prints for a kcp tenant, a standard-mode tenant
// and a look at the workload cluster, in that order.
func tenantBlocks(banner string) (kcp, standard, workload []string) {
	blocks, i := [3][]string{}, -1
	for _, line := range strings.Split(banner, "\n") {
		switch {
		case strings.HasPrefix(line, "As a tenant in kcp"):
			i = 0
		case strings.HasPrefix(line, "As a tenant in standard mode"):
			i = 1
		case strings.HasPrefix(line, "The workers"):
			i = 2
		case strings.HasPrefix(line, "Press Ctrl-C"):
			i = -1
		case i >= 0 && strings.HasPrefix(line, "  "):
			blocks[i] = append(blocks[i], strings.TrimSpace(line))
		}
	}
	return blocks[0], blocks[1], blocks[2]
}

// snapshot is every file under dir by its path.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		files[p] = raw
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// failures are the lines of go test's output that say what failed, wherever they are
// among the servers' logs.
func failures(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "--- FAIL") || strings.Contains(trimmed, "_test.go:") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
