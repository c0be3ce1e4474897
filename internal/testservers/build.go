package testservers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The versions the pins build, for the log and the binaries' version variables.
const (
	kcpVersion  = "v0.30.0"
	kcpKubeVer  = "v1.34.2+kcp-v0.30.0"
	kubeVersion = "v1.36.0"
)

// builder builds the missing parts into the cache.
type builder struct {
	opts Options
	f    folders
}

// build runs the builds of the missing parts. Building everything, it first downloads
// every module at once (network, not CPU), then runs two lanes side by side: kcp's,
// the longest, and the others one after another. Each go build compiles on both cores
// but links its binaries one core each, so a lane linking (a minute or more for kcp
// and kube-apiserver) leaves a core to the other lane's compiles; each lane builds a
// module's binaries in one go build, which compiles their shared packages once.
func (b *builder) build(ctx context.Context, missing []string, all bool) error {
	steps := map[string]func(context.Context) error{
		PartKCP: b.kcp, PartKube: b.kube, PartCluster: b.cluster, PartOperator: b.operator, PartFlux: b.flux,
	}
	if !all {
		for _, p := range missing {
			if err := b.timed(p, func() error { return steps[p](ctx) }); err != nil {
				return err
			}
		}
		return nil
	}
	if err := b.timed("module downloads", func() error { return b.downloadAll(ctx) }); err != nil {
		return err
	}
	// kube-controller-manager and kube-scheduler follow kcp in its lane: by then the
	// other lane has compiled kube-apiserver's packages, which they share.
	var kcpLane, rest []string
	for _, p := range missing {
		if p == PartKCP || p == PartCluster {
			kcpLane = append(kcpLane, p)
		} else {
			rest = append(rest, p)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, lane := range [][]string{kcpLane, rest} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range lane {
				if err := b.timed(p, func() error { return steps[p](ctx) }); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("a build failed (its output is above): %w", err)
	}
	return nil
}

// timed runs fn and says how long it took.
func (b *builder) timed(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	if took := time.Since(start).Round(time.Second); err == nil && took > time.Second {
		b.opts.Log(fmt.Sprintf("%s: %d min %d s", name, int(took.Minutes()), int(took.Seconds())%60))
	}
	return err
}

// module writes a tools module's go.mod and go.sum into a folder of the cache and
// returns it. The go commands run there.
func (b *builder) module(name string) (string, error) {
	dir := filepath.Join(b.f.cache, "modules", name+"-"+b.f.keys[name])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for src, dst := range map[string]string{"go.mod.txt": "go.mod", "go.sum.txt": "go.sum"} {
		data, err := modules.ReadFile(path.Join("modules", name, src))
		if err != nil {
			return "", err
		}
		if cur, err := os.ReadFile(filepath.Join(dir, dst)); err == nil && bytes.Equal(cur, data) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// goCmd runs the go command in dir. The forks' pseudo-versions are not in the checksum
// database; the pinned go.sum files vouch for them instead.
func (b *builder) goCmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = b.opts.Output, b.opts.Output
	env := append(os.Environ(), "GOFLAGS=-mod=mod")
	if os.Getenv("GONOSUMDB") == "" {
		env = append(env, "GONOSUMDB=github.com/kcp-dev")
	}
	cmd.Env = env
	return cmd
}

func (b *builder) run(ctx context.Context, dir string, args ...string) error {
	if err := b.goCmd(ctx, dir, args...).Run(); err != nil {
		return fmt.Errorf("go %s (in %s): %w", strings.Join(args, " "), dir, err)
	}
	return nil
}

// output runs the go command in dir and returns its trimmed standard output.
func (b *builder) output(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := b.goCmd(ctx, dir, args...)
	cmd.Stdout = nil
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s (in %s): %w", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (b *builder) downloadAll(ctx context.Context) error {
	errs := make([]error, len(toolModules))
	var wg sync.WaitGroup
	for i, name := range toolModules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := b.module(name)
			if err == nil {
				err = b.run(ctx, dir, "mod", "download")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// versionFlags sets client-go's and component-base's version variables, which the
// servers report and the clients check.
func versionFlags(version, minor, commit string) string {
	date := time.Now().UTC().Format(time.RFC3339)
	var ld []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		ld = append(ld, "-X", pkg+".gitVersion="+version, "-X", pkg+".gitMajor=1", "-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitCommit="+commit, "-X", pkg+".gitTreeState=clean", "-X", pkg+".buildDate="+date)
	}
	return strings.Join(ld, " ")
}

// replaceDir moves the finished tmp folder to dir.
func replaceDir(tmp, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// kcp builds kcp and, for a sharded kcp, its cache-server and kcp-front-proxy: in one
// go build when both folders are missing.
func (b *builder) kcp(ctx context.Context) error {
	haveKCP := executable(filepath.Join(b.f.kcp, "kcp"))
	haveSharding := executable(filepath.Join(b.f.kcpSharding, "cache-server")) && executable(filepath.Join(b.f.kcpSharding, "kcp-front-proxy"))
	switch {
	case !haveKCP && !haveSharding:
		b.opts.Log(fmt.Sprintf("building kcp %s (patched, see internal/testservers/modules/kcp/patches) with its cache-server and kcp-front-proxy into %s and %s; usually 8 to 25 min on two cores", kcpVersion, b.f.kcp, b.f.kcpSharding))
		all := b.f.kcp + ".all"
		if err := b.kcpCommands(ctx, all, "kcp", "cache-server", "kcp-front-proxy"); err != nil {
			return err
		}
		tmp := b.f.kcpSharding + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		for _, bin := range []string{"cache-server", "kcp-front-proxy"} {
			if err := os.Rename(filepath.Join(all, bin), filepath.Join(tmp, bin)); err != nil {
				return err
			}
		}
		if err := replaceDir(tmp, b.f.kcpSharding); err != nil {
			return err
		}
		return replaceDir(all, b.f.kcp)
	case !haveKCP:
		b.opts.Log(fmt.Sprintf("building kcp %s (patched) into %s; usually 8 to 25 min on two cores", kcpVersion, b.f.kcp))
		return b.kcpCommands(ctx, b.f.kcp, "kcp")
	case !haveSharding:
		b.opts.Log(fmt.Sprintf("building kcp %s's cache-server and kcp-front-proxy into %s; usually 1 to 3 min", kcpVersion, b.f.kcpSharding))
		return b.kcpCommands(ctx, b.f.kcpSharding, "cache-server", "kcp-front-proxy")
	}
	return nil
}

// kcpCommands builds kcp's commands cmds (under cmd/) into out: kcp's source with the
// patches applied (each file says why), built through a copy of the tools module that
// replaces kcp with it. With -trimpath the source's folder is not part of the build
// cache's keys, so a second call reuses the packages the first compiled.
func (b *builder) kcpCommands(ctx context.Context, out string, cmds ...string) error {
	dir, err := b.module("kcp")
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tmp, "mod"), 0o755); err != nil {
		return err
	}
	if err := b.run(ctx, dir, "mod", "download", "github.com/kcp-dev/kcp"); err != nil {
		return err
	}
	src, err := b.output(ctx, dir, "list", "-m", "-f", "{{.Dir}}", "github.com/kcp-dev/kcp")
	if err != nil {
		return err
	}
	patched := filepath.Join(tmp, "src")
	if err := shell(ctx, b.opts, "", "cp", "-r", src, patched); err != nil {
		return err
	}
	if err := shell(ctx, b.opts, "", "chmod", "-R", "u+w", patched); err != nil {
		return err
	}
	patches, err := fs.Glob(modules, "modules/kcp/patches/*.patch")
	if err != nil {
		return err
	}
	for _, p := range patches {
		b.opts.Log("applying " + path.Base(p))
		data, err := modules.ReadFile(p)
		if err != nil {
			return err
		}
		if err := applyPatch(ctx, b.opts, patched, data); err != nil {
			return fmt.Errorf("applying %s: %w", path.Base(p), err)
		}
	}
	modfile := filepath.Join(tmp, "mod", "go.mod")
	for src, dst := range map[string]string{"go.mod": modfile, "go.sum": filepath.Join(tmp, "mod", "go.sum")} {
		data, err := os.ReadFile(filepath.Join(dir, src))
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	if err := b.run(ctx, dir, "mod", "edit", "-replace", "github.com/kcp-dev/kcp="+patched, modfile); err != nil {
		return err
	}
	args := []string{"build", "-modfile=" + modfile, "-trimpath", "-ldflags", "-s -w " + versionFlags(kcpKubeVer, "34", kcpVersion), "-o", tmp + "/"}
	for _, c := range cmds {
		args = append(args, "github.com/kcp-dev/kcp/cmd/"+c)
	}
	if err := b.run(ctx, dir, args...); err != nil {
		return err
	}
	if err := os.RemoveAll(patched); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(tmp, "mod")); err != nil {
		return err
	}
	return replaceDir(tmp, out)
}

// applyPatch applies a patch to dir with patch(1), or git apply where there is none.
func applyPatch(ctx context.Context, opts Options, dir string, data []byte) error {
	var cmd *exec.Cmd
	if _, err := exec.LookPath("patch"); err == nil {
		cmd = exec.CommandContext(ctx, "patch", "-d", dir, "-p1", "--quiet", "--forward")
	} else {
		cmd = exec.CommandContext(ctx, "git", "apply", "-p1")
		cmd.Dir = dir
	}
	cmd.Stdin = bytes.NewReader(data)
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	return cmd.Run()
}

// shell runs a program of the system (cp, chmod).
func shell(ctx context.Context, opts Options, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// kube builds kube-apiserver, kubectl and etcd in one go build: etcd ignores the
// version variables, which it does not have; go build names its binary after the
// module's last element before the major version (server), renamed to etcd.
func (b *builder) kube(ctx context.Context) error {
	b.opts.Log(fmt.Sprintf("building kube-apiserver, kubectl %s and etcd v3.6.8 into %s; usually 6 to 21 min on two cores", kubeVersion, b.f.kube))
	dir, err := b.module("kube")
	if err != nil {
		return err
	}
	tmp := b.f.kube + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := b.run(ctx, dir, "build", "-trimpath", "-ldflags", "-s -w "+versionFlags(kubeVersion, "36", kubeVersion), "-o", tmp+"/",
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl", "go.etcd.io/etcd/server/v3"); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, "server"), filepath.Join(tmp, "etcd")); err != nil {
		return err
	}
	return replaceDir(tmp, b.f.kube)
}

// cluster builds kube-controller-manager and kube-scheduler of kube-apiserver's
// release, and KWOK's controller (its own module: it pins its own client libraries),
// and copies KWOK's stages for nodes (ready at once, heartbeats through Leases) and
// pods (running and ready at once, completed, deleted) from its module: the kwok
// binary embeds none.
func (b *builder) cluster(ctx context.Context) error {
	b.opts.Log(fmt.Sprintf("building kube-controller-manager and kube-scheduler %s and KWOK v0.8.0 into %s; usually 3 to 8 min on two cores", kubeVersion, b.f.cluster))
	tmp := b.f.cluster + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	stages := filepath.Join(tmp, "kwok-stages")
	if err := os.MkdirAll(stages, 0o755); err != nil {
		return err
	}
	dir, err := b.module("cluster")
	if err != nil {
		return err
	}
	if err := b.run(ctx, dir, "build", "-trimpath", "-ldflags", "-s -w "+versionFlags(kubeVersion, "36", kubeVersion), "-o", tmp+"/",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler"); err != nil {
		return err
	}
	if dir, err = b.module("kwok"); err != nil {
		return err
	}
	if err := b.run(ctx, dir, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "kwok"), "sigs.k8s.io/kwok/cmd/kwok"); err != nil {
		return err
	}
	src, err := b.output(ctx, dir, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	var files []string
	for _, file := range []string{"node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		files = append(files, filepath.Join(src, "kustomize", "stage", file))
	}
	if err := copyFiles(stages, files); err != nil {
		return err
	}
	return replaceDir(tmp, b.f.cluster)
}

func (b *builder) operator(ctx context.Context) error {
	b.opts.Log(fmt.Sprintf("building openmcp-operator v1.3.0 into %s; usually 2 to 5 min", b.f.operator))
	dir, err := b.module("operator")
	if err != nil {
		return err
	}
	tmp := b.f.operator + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := b.run(ctx, dir, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "openmcp-operator"),
		"github.com/openmcp-project/openmcp-operator/cmd/openmcp-operator"); err != nil {
		return err
	}
	return replaceDir(tmp, b.f.operator)
}

// flux builds Flux's source-controller and helm-controller with their CRDs, the helm
// CLI and the OCI registry into one folder.
func (b *builder) flux(ctx context.Context) error {
	b.opts.Log(fmt.Sprintf("building Flux source-controller v1.9.3, helm-controller v1.6.2, helm v4.2.2 and registry v3.1.2 into %s; usually 4 to 10 min", b.f.flux))
	tmp := b.f.flux + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	crds := filepath.Join(tmp, "crds")
	if err := os.MkdirAll(crds, 0o755); err != nil {
		return err
	}
	for _, step := range []struct {
		module, out, crdsOf string
		pkgs                []string
	}{
		{"flux-source", filepath.Join(tmp, "source-controller"), "github.com/fluxcd/source-controller", []string{"github.com/fluxcd/source-controller"}},
		{"flux-helm", tmp + "/", "github.com/fluxcd/helm-controller", []string{"github.com/fluxcd/helm-controller", "helm.sh/helm/v4/cmd/helm"}},
		{"registry", filepath.Join(tmp, "registry"), "", []string{"github.com/distribution/distribution/v3/cmd/registry"}},
	} {
		dir, err := b.module(step.module)
		if err != nil {
			return err
		}
		if err := b.run(ctx, dir, append([]string{"build", "-trimpath", "-ldflags", "-s -w", "-o", step.out}, step.pkgs...)...); err != nil {
			return err
		}
		if step.crdsOf == "" {
			continue
		}
		src, err := b.output(ctx, dir, "list", "-m", "-f", "{{.Dir}}", step.crdsOf)
		if err != nil {
			return err
		}
		files, err := filepath.Glob(filepath.Join(src, "config", "crd", "bases", "*.yaml"))
		if err != nil {
			return err
		}
		if err := copyFiles(crds, files); err != nil {
			return err
		}
	}
	return replaceDir(tmp, b.f.flux)
}

// copyFiles copies files (from a module's source, read-only) into dir under their own
// names.
func copyFiles(dir string, files []string) error {
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(file)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
