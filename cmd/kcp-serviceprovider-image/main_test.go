package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImage builds the reference provider's image twice and checks what a platform
// pulling it gets: the same digest from the same commit, a non-root user, the binary
// as entrypoint, and a root filesystem from which the binary runs (--help).
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	chdirRepo(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	da, err := build("./cmd/kcp-serviceprovider", a, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	db, err := build("./cmd/kcp-serviceprovider", b, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("two builds of one commit: digests %s and %s", da, db)
	}

	p, err := layout.FromPath(a)
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(da)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	entry := "/usr/local/bin/kcp-serviceprovider"
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != entry || cfg.OS != "linux" {
		t.Errorf("config: user %q, entrypoint %q, os %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.OS)
	}

	root := t.TempDir()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		if err := untar(rc, root); err != nil {
			t.Fatal(err)
		}
		_ = rc.Close()
	}
	if passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532") {
		t.Errorf("/etc/passwd: %q, %v", passwd, err)
	}
	out, err := exec.Command(filepath.Join(root, entry), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: kcp-serviceprovider <command>") || strings.Contains(string(out), "local ") {
		t.Errorf("the image's binary --help: %v\n%s", err, out)
	}
}

// chdirRepo runs the test from the module root, where build expects the main package.
func chdirRepo(t *testing.T) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(wd, "..", ".."))
}

// untar writes the regular files and folders of a layer under root.
func untar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
