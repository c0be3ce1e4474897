package testservers

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

//go:embed modules
var modules embed.FS

// recipe is part of every cache key: bump it when the build steps below change, so
// that cached binaries are rebuilt.
const recipe = "2"

// The parts Ensure builds, alone or together.
const (
	PartKCP      = "kcp"      // kcp with its cache-server and kcp-front-proxy
	PartKube     = "kube"     // kube-apiserver, kubectl and etcd
	PartOperator = "operator" // the openmcp-operator
	PartFlux     = "flux"     // Flux's controllers and CRDs, helm and the registry
	// PartCluster is what makes an API server a cluster: kube-controller-manager and
	// kube-scheduler of kube-apiserver's release, and KWOK's controller with its
	// stages for simulated nodes.
	PartCluster = "cluster"
)

// Options say where the cache is and where progress goes.
type Options struct {
	// CacheDir is the cache's root. Default: $KSP_CACHE_DIR, else
	// $XDG_CACHE_HOME/kcp-serviceprovider, else ~/.cache/kcp-serviceprovider.
	CacheDir string
	// Log gets one line per step: what is built, how long it usually takes, and how
	// long it took. Default: standard error, prefixed "test-binaries: ".
	Log func(line string)
	// Output gets the go commands' own output. Default: standard error.
	Output io.Writer
}

// toolModules are the tools modules under modules/, each pinning what one build
// compiles.
var toolModules = []string{"kcp", "kube", "cluster", "kwok", "operator", "flux-source", "flux-helm", "registry"}

// folders are the cache's folders for one set of pins.
type folders struct {
	cache, kcp, kcpSharding, kube, cluster, operator, flux, assets string
	keys                                                           map[string]string
}

// binaries are what each part puts into its folder.
var binaries = map[string][]string{
	PartKCP:      {"kcp", "cache-server", "kcp-front-proxy"},
	PartKube:     {"kube-apiserver", "etcd", "kubectl"},
	PartOperator: {"openmcp-operator"},
	PartFlux:     {"source-controller", "helm-controller", "helm", "registry"},
	PartCluster:  {"kube-controller-manager", "kube-scheduler", "kwok"},
}

func (o Options) withDefaults() (Options, error) {
	if o.CacheDir == "" {
		o.CacheDir = os.Getenv("KSP_CACHE_DIR")
	}
	if o.CacheDir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return o, fmt.Errorf("no cache folder: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		o.CacheDir = filepath.Join(base, "kcp-serviceprovider")
	}
	if o.Output == nil {
		o.Output = os.Stderr
	}
	if o.Log == nil {
		out := o.Output
		o.Log = func(line string) { fmt.Fprintln(out, "test-binaries: "+line) }
	}
	return o, nil
}

// key hashes a tools module's go.mod, go.sum and patches, and the recipe.
func key(name string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod.txt", "go.sum.txt"} {
		b, err := modules.ReadFile(path.Join("modules", name, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	patches, err := fs.Glob(modules, path.Join("modules", name, "patches", "*.patch"))
	if err != nil {
		return "", err
	}
	for _, p := range patches {
		b, err := modules.ReadFile(p)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	h.Write([]byte(recipe + "\n"))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (o Options) folders() (folders, error) {
	f := folders{cache: o.CacheDir, keys: map[string]string{}}
	for _, m := range toolModules {
		k, err := key(m)
		if err != nil {
			return f, fmt.Errorf("the pins of %s: %w", m, err)
		}
		f.keys[m] = k
	}
	fluxKey := sha256.Sum256([]byte(f.keys["flux-source"] + "\n" + f.keys["flux-helm"] + "\n" + f.keys["registry"] + "\n"))
	flux := hex.EncodeToString(fluxKey[:])[:16]
	f.kcp = filepath.Join(o.CacheDir, "kcp-"+f.keys["kcp"])
	// kcp's cache-server and front-proxy have a folder of their own, so that adding
	// them did not rebuild kcp.
	f.kcpSharding = filepath.Join(o.CacheDir, "kcp-sharding-"+f.keys["kcp"])
	f.kube = filepath.Join(o.CacheDir, "kube-"+f.keys["kube"])
	clusterKey := sha256.Sum256([]byte(f.keys["cluster"] + "\n" + f.keys["kwok"] + "\n"))
	f.cluster = filepath.Join(o.CacheDir, "cluster-"+hex.EncodeToString(clusterKey[:])[:16])
	f.operator = filepath.Join(o.CacheDir, "operator-"+f.keys["operator"])
	f.flux = filepath.Join(o.CacheDir, "flux-"+flux)
	f.assets = filepath.Join(o.CacheDir, "assets", strings.Join([]string{f.keys["kcp"], f.keys["kube"], f.keys["operator"], flux, filepath.Base(f.cluster)[len("cluster-"):]}, "-"))
	return f, nil
}

// where returns the folder a binary of part lives in.
func (f folders) where(part, bin string) string {
	switch part {
	case PartKCP:
		if bin == "kcp" {
			return f.kcp
		}
		return f.kcpSharding
	case PartKube:
		return f.kube
	case PartCluster:
		return f.cluster
	case PartOperator:
		return f.operator
	default:
		return f.flux
	}
}

// built says whether every binary of part is in the cache.
func (f folders) built(part string) bool {
	for _, b := range binaries[part] {
		if !executable(filepath.Join(f.where(part, b), b)) {
			return false
		}
	}
	return true
}

// complete says whether every part is in the cache.
func (f folders) complete() bool {
	for part := range binaries {
		if !f.built(part) {
			return false
		}
	}
	return true
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Find returns the folder with every binary when all are built, without building
// anything.
func Find(opts Options) (string, bool, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", false, err
	}
	f, err := opts.folders()
	if err != nil {
		return "", false, err
	}
	if !f.complete() {
		return "", false, nil
	}
	return f.assets, true, f.link()
}

// Ensure builds the parts that are missing (all of them when none is named) and, once
// every part is built, returns the folder with every binary; "" when only some parts
// were asked for and others are missing. Concurrent calls, from processes too, wait
// for one another.
func Ensure(ctx context.Context, opts Options, parts ...string) (string, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	f, err := opts.folders()
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		if _, ok := binaries[p]; !ok {
			return "", fmt.Errorf("no part %q (kcp, kube, cluster, operator or flux)", p)
		}
	}
	all := len(parts) == 0
	if all {
		parts = []string{PartKCP, PartKube, PartCluster, PartOperator, PartFlux}
	}
	var missing []string
	for _, p := range parts {
		if !f.built(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		unlock, err := lock(ctx, filepath.Join(opts.CacheDir, ".build.lock"), opts.Log)
		if err != nil {
			return "", err
		}
		defer unlock()
		b := &builder{opts: opts, f: f}
		if err := b.build(ctx, missing, all); err != nil {
			return "", err
		}
	}
	if !f.complete() {
		return "", nil
	}
	return f.assets, f.link()
}

// lock takes an exclusive lock on file, saying so when another process holds it.
func lock(ctx context.Context, file string, log func(string)) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	fd, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(fd.Fd()), syscall.LOCK_UN); _ = fd.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = fd.Close()
			return nil, fmt.Errorf("locking %s: %w", file, err)
		}
		if !said {
			log("another process builds the servers; waiting for it (" + file + ")")
			said = true
		}
		select {
		case <-ctx.Done():
			_ = fd.Close()
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// link makes the assets folder: every binary, in the layout controller-runtime's
// envtest expects (KUBEBUILDER_ASSETS), plus kcp, the operator and Flux, its CRDs
// under flux-crds/, KWOK's stages under kwok-stages/.
func (f folders) link() error {
	if err := os.MkdirAll(f.assets, 0o755); err != nil {
		return err
	}
	for part, bins := range binaries {
		for _, b := range bins {
			if err := symlink(filepath.Join(f.where(part, b), b), filepath.Join(f.assets, b)); err != nil {
				return err
			}
		}
	}
	if err := symlink(filepath.Join(f.cluster, "kwok-stages"), filepath.Join(f.assets, "kwok-stages")); err != nil {
		return err
	}
	return symlink(filepath.Join(f.flux, "crds"), filepath.Join(f.assets, "flux-crds"))
}

func symlink(target, name string) error {
	if cur, err := os.Readlink(name); err == nil && cur == target {
		return nil
	}
	_ = os.Remove(name)
	return os.Symlink(target, name)
}
