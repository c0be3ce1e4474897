package testservers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cache that holds every binary is found without building anything, and the assets
// folder links each binary and Flux's CRDs by name; a cache missing one binary is not.
func TestFindLinksEveryBinary(t *testing.T) {
	opts := Options{CacheDir: t.TempDir(), Log: func(string) {}}
	if _, ok, err := Find(opts); err != nil || ok {
		t.Fatalf("Find in an empty cache = %v, %v; want not found", ok, err)
	}
	f, err := opts.folders()
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for part, bins := range binaries {
		for _, b := range bins {
			last = filepath.Join(f.where(part, b), b)
			if err := os.MkdirAll(filepath.Dir(last), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(last, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range []string{filepath.Join(f.flux, "crds"), filepath.Join(f.cluster, "kwok-stages")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, ok, err := Find(opts)
	if err != nil || !ok {
		t.Fatalf("Find with every binary = %v, %v; want found", ok, err)
	}
	if !strings.HasPrefix(dir, filepath.Join(opts.CacheDir, "assets")+string(filepath.Separator)) || strings.Count(filepath.Base(dir), "-") != 4 {
		t.Errorf("assets folder %s, want assets/<kcp>-<kube>-<operator>-<flux>-<cluster>", dir)
	}
	for _, bins := range binaries {
		for _, b := range bins {
			if !executable(filepath.Join(dir, b)) {
				t.Errorf("assets folder lacks %s", b)
			}
		}
	}
	for _, d := range []string{"flux-crds", "kwok-stages"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("assets folder lacks %s/: %v", d, err)
		}
	}
	// Found again: the links are kept as they are.
	if again, ok, err := Find(opts); err != nil || !ok || again != dir {
		t.Errorf("Find again = %s, %v, %v", again, ok, err)
	}
	if err := os.Remove(last); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Find(opts); ok {
		t.Error("Find with a binary missing says found")
	}
}

// The folders are keyed by the pins: kcp's sharding binaries share kcp's key, and
// every key is 16 hex digits.
func TestFoldersAreKeyedByThePins(t *testing.T) {
	f, err := Options{CacheDir: "/cache"}.folders()
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range f.keys {
		if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
			t.Errorf("key of %s: %q", name, k)
		}
	}
	if f.kcp != "/cache/kcp-"+f.keys["kcp"] || f.kcpSharding != "/cache/kcp-sharding-"+f.keys["kcp"] {
		t.Errorf("kcp folders %s, %s", f.kcp, f.kcpSharding)
	}
}

// An unknown part is refused before anything is built.
func TestEnsureRefusesAnUnknownPart(t *testing.T) {
	if _, err := Ensure(context.Background(), Options{CacheDir: t.TempDir(), Log: func(string) {}}, "kafka"); err == nil {
		t.Error("Ensure(kafka) built something")
	}
}

// A second builder waits for the first: the lock is held until released, and then
// taken.
func TestLockWaitsForTheHolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".build.lock")
	unlock, err := lock(context.Background(), file, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	waited := ""
	if _, err := lock(ctx, file, func(line string) { waited = line }); err == nil {
		t.Fatal("a second lock was taken while the first was held")
	}
	if waited == "" {
		t.Error("the waiting builder said nothing")
	}
	unlock()
	unlock2, err := lock(context.Background(), file, func(string) {})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}
