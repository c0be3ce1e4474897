package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/internal/testservers"
)

// AssetsEnv names the environment variable holding the folder with kcp,
// kube-apiserver, etcd and kubectl (what hack/test-binaries.sh prints, and
// internal/testservers builds).
const AssetsEnv = "KSP_TEST_ASSETS"

// requiredBinaries are what an Env starts or hands to the user.
var requiredBinaries = []string{"kcp", "kube-apiserver", "etcd", "kubectl", ControllerManagerBinary, SchedulerBinary, KWOKBinary}

// Env owns every process it started and the folder they write into.
type Env struct {
	// Dir is the folder every file of the Env goes into.
	Dir string
	// Assets is the folder holding the server binaries.
	Assets string

	thread    *pinnedThread
	closeOnce sync.Once

	mu    sync.Mutex
	stops []stopper
	logs  []string
}

type stopper struct {
	name string
	stop func() error
}

// New returns an Env writing into dir (which must exist) and starting the binaries in
// assets.
func New(dir, assets string) (*Env, error) {
	if err := CheckAssets(assets); err != nil {
		return nil, err
	}
	for _, sub := range []string{"logs", "kubeconfigs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", sub, err)
		}
	}
	return &Env{Dir: dir, Assets: assets, thread: newPinnedThread()}, nil
}

// LogPath is the log file of a component.
func (e *Env) LogPath(name string) string { return filepath.Join(e.Dir, "logs", name+".log") }

// Logs lists the log files of what the Env started, oldest first.
func (e *Env) Logs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.logs)
}

// openLog opens (appending) the log file of a component and remembers it for Logs.
func (e *Env) openLog(name string) (*os.File, error) {
	path := e.LogPath(name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	e.mu.Lock()
	if !slices.Contains(e.logs, path) {
		e.logs = append(e.logs, path)
	}
	e.mu.Unlock()
	return f, nil
}

// KubeconfigPath is where a kubeconfig of the given name is written.
func (e *Env) KubeconfigPath(name string) string {
	return filepath.Join(e.Dir, "kubeconfigs", name+".kubeconfig")
}

// onStop registers a stop function; Stop calls them in reverse order.
func (e *Env) onStop(name string, stop func() error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, stopper{name: name, stop: stop})
}

// StartProcess starts a helper process (path with args and extra environment), with
// its output in logs/<name>.log. Stop terminates it (SIGTERM, SIGKILL after grace;
// with no grace, SIGKILL at once).
func (e *Env) StartProcess(name, path string, args, env []string, grace time.Duration) (*Process, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = e.Dir
	cmd.Env = MergeEnv(os.Environ(), env...)
	p, err := e.startProcess(name, cmd)
	if err != nil {
		return nil, err
	}
	e.onStop(name, func() error { return p.Stop(grace) })
	return p, nil
}

// Stop stops everything the Env started, newest first, and reports every failure.
// Calling it again does nothing.
func (e *Env) Stop() error {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	var errs []error
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i].stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", stops[i].name, err))
		}
	}
	// Everything it started has stopped: the pinned thread may end.
	e.closeOnce.Do(e.thread.close)
	return errors.Join(errs...)
}

// CheckAssets says which binaries a folder lacks.
func CheckAssets(dir string) error {
	if dir == "" {
		return errors.New("no folder with the server binaries")
	}
	var missing []string
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// AssetsDir returns the folder named by KSP_TEST_ASSETS after checking that it holds
// every binary an Env starts. The error says which ones are missing.
func AssetsDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set", AssetsEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s=%q: %w", AssetsEnv, dir, err)
	}
	if err := CheckAssets(abs); err != nil {
		return "", fmt.Errorf("%s=%w", AssetsEnv, err)
	}
	return abs, nil
}

// FindAssets returns the folder with the server binaries: $KSP_TEST_ASSETS when set,
// otherwise the one internal/testservers builds into the user's cache on first use (20
// to 40 minutes on two cores, a line per step to progress) and finds at once afterwards.
func FindAssets(ctx context.Context, progress io.Writer) (string, error) {
	if os.Getenv(AssetsEnv) != "" {
		return AssetsDir()
	}
	dir, err := testservers.Ensure(ctx, testservers.Options{Output: progress})
	if err != nil {
		return "", fmt.Errorf("building the servers: %w", err)
	}
	return dir, CheckAssets(dir)
}

// FreePorts returns n distinct ports that were free on 127.0.0.1 a moment ago. They
// are held open together so that none is handed out twice, and taken below the
// kernel's ephemeral range: a port from that range (what listening on port 0 gives)
// can be taken by any outgoing connection of a busy test machine between this check
// and the server's bind, which failed a CI run with "address already in use". Below the
// range only another listener can take it.
func FreePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	low, high := belowEphemeral()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if high > low && tries < 100*n {
			addr = fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(high-low))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: try another
			}
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// belowEphemeral is the range FreePorts picks from: from 20000 up to the kernel's first
// ephemeral port (Linux's ip_local_port_range); empty where that is unknown.
func belowEphemeral() (low, high int) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(raw), &first, &last); err != nil || first <= 20000 {
		return 0, 0
	}
	return 20000, first
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LogTail returns the last lines of a log file, for error messages.
func LogTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// MergeEnv returns base with the variables of overrides ("NAME=value") replacing
// those of the same name. Appending is not enough: with duplicate names, a Go program
// (like this one after a re-exec) reads the first.
func MergeEnv(base []string, overrides ...string) []string {
	names := map[string]bool{}
	for _, kv := range overrides {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	out := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}
