package localenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// orphanChildEnv makes TestOrphanChild run; TestNoOrphans sets it for its child.
const orphanChildEnv = "KSP_HARNESS_ORPHAN_CHILD"

// TestNoOrphans runs this test binary again as a child that starts an API server
// (etcd, kube-apiserver through envtest) and kcp and then dies the way `go test
// -timeout` kills a binary: a panic, so no Stop runs. Every server the child started
// must be gone shortly after, and the next sweep must remove its files.
func TestNoOrphans(t *testing.T) {
	if os.Getenv(orphanChildEnv) != "" {
		t.Skip("this is the child")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOrphanChild$", "-test.v")
	cmd.Env = append(os.Environ(), orphanChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child exited cleanly, it should have panicked:\n%s", tail(out))
	}

	var pids []int
	var childRunDir string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "SERVER-PID "); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			pids = append(pids, pid)
		}
		if v, ok := strings.CutPrefix(line, "RUN-DIR "); ok {
			childRunDir = v
		}
	}
	// etcd, kube-apiserver and kcp.
	if len(pids) < 3 || childRunDir == "" {
		t.Fatalf("the child reported pids %v and run dir %q, want 3 pids and a dir:\n%s", pids, childRunDir, tail(out))
	}

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		for _, pid := range pids {
			if alive(pid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var left []string
		for _, pid := range pids {
			if alive(pid) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d (%s)", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
				// Do not leave them running for the next test.
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		t.Fatalf("servers outlived the test binary: %v", left)
	}
	t.Logf("all %d servers of the dead child are gone", len(pids))

	if _, err := os.Stat(childRunDir); err != nil {
		t.Fatalf("the child's files should still exist before the sweep: %v", err)
	}
	SweepStaleRunDirs()
	if _, err := os.Stat(childRunDir); !os.IsNotExist(err) {
		t.Fatalf("the sweep left the dead child's files in %s (stat: %v)", childRunDir, err)
	}
}

// TestOrphanChild is the child half of TestNoOrphans.
func TestOrphanChild(t *testing.T) {
	if os.Getenv(orphanChildEnv) == "" {
		t.Skip("runs only as the child of TestNoOrphans")
	}
	assets, err := AssetsDir()
	if err != nil {
		t.Fatalf("test binaries missing: %v", err)
	}
	dir, err := ScratchDir("orphan")
	if err != nil {
		t.Fatal(err)
	}
	env, err := New(dir, assets)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.StartAPIServer(PurposeMCP, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.StartKCP(t.Context(), KCPOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pid := range childrenOf(t, os.Getpid()) {
		fmt.Printf("SERVER-PID %d\n", pid)
	}
	runDir, _ := RunDir()
	fmt.Printf("RUN-DIR %s\n", runDir)
	// What the testing package does when -timeout expires: panic on another
	// goroutine while the test is still running, so no cleanup runs.
	go func() { panic("simulated test timeout") }()
	select {}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may contain spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			kid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			kids = append(kids, kid)
		}
	}
	return kids
}

// alive reports whether pid is a running process (a zombie counts as gone: it no
// longer runs, only its exit status waits for a reaper).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(data[i+1:])), "Z")
}

func tail(out []byte) string {
	const n = 4000
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
