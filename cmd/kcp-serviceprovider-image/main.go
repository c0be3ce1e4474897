// Command kcp-serviceprovider-image builds the container image of a provider binary
// without a container daemon: a static Linux binary (CGO off, -trimpath) on a base of three files kept
// here (/etc/passwd and /etc/group with the non-root user 65532, and an empty /tmp),
// the binary as entrypoint, written as an OCI image layout. It is reproducible: the
// same commit and Go toolchain give the same digest (no timestamps, fixed file
// metadata, go build without VCS stamps or build IDs). `make image` runs it here; a
// provider's module names it as a tool in its go.mod and runs it from its root:
//
//	go tool kcp-serviceprovider-image [-main .] [-out dist/image] [-arch amd64]
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, the number distroless images use for "nonroot".
const (
	uid     = 65532
	user    = "nonroot"
	binDir  = "/usr/local/bin"
	tmpPath = "tmp"
)

func main() {
	mainPkg := flag.String("main", ".", "the main package to build, relative to the module root")
	out := flag.String("out", "dist/image", "folder of the OCI image layout to write (replaced)")
	arch := flag.String("arch", "amd64", "GOARCH of the binary and the image")
	flag.Parse()
	digest, err := build(*mainPkg, *out, *arch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s written to %s (OCI layout)\n", digest, *out)
}

// build writes the image of mainPkg to the OCI layout out and returns its digest.
func build(mainPkg, out, arch string) (v1.Hash, error) {
	tmp, err := os.MkdirTemp("", "image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	name, err := binaryName(mainPkg)
	if err != nil {
		return v1.Hash{}, err
	}
	bin := filepath.Join(tmp, name)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, mainPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return v1.Hash{}, fmt.Errorf("building %s: %w", mainPkg, err)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := image(name, binary, arch)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(out); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: %w", out, err)
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image to %s: %w", out, err)
	}
	return img.Digest()
}

// binaryName is the name of mainPkg's binary as go build gives it: its folder's name,
// also for "." (a provider whose main package is its module's root).
func binaryName(mainPkg string) (string, error) {
	abs, err := filepath.Abs(mainPkg)
	if err != nil {
		return "", err
	}
	return filepath.Base(abs), nil
}

// image is the base layer and the binary's layer, with the binary as entrypoint run
// by the non-root user.
func image(name string, binary []byte, arch string) (v1.Image, error) {
	base, err := layer([]file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", user, uid, uid, user, user)},
		{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", user, uid)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/" + user + "/", mode: 0o700, dir: true, owner: uid},
		{name: tmpPath + "/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/" + name, mode: 0o755, data: binary},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.Config.Entrypoint = []string{binDir + "/" + name}
	cfg.Config.WorkingDir = "/home/" + user
	cfg.Config.Env = []string{"PATH=" + binDir + ":/usr/bin:/bin", "HOME=/home/" + user, "TMPDIR=/" + tmpPath}
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	name  string
	mode  int64
	dir   bool
	owner int
	data  []byte
}

// layer is a gzipped tar of files with fixed metadata, so that the same files give
// the same digest.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}
