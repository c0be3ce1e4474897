package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
)

//go:embed all:template
var files embed.FS

const (
	// RuntimeModule is the module a new provider requires.
	RuntimeModule = "github.com/openmcp-project/kcp-serviceprovider"

	// GoVersion is a new module's go directive: the one this module names (a test keeps
	// them equal).
	GoVersion = "1.26.5"
	// ControllerGen is the controller-gen version of a new module's generate target:
	// the one this module generates its own types with (hack/tools/codegen; a test keeps
	// them equal), so a new module's generated files equal the template's.
	ControllerGen = "v0.21.0"

	// What the template names, rewritten in every file copied.
	templateModule = RuntimeModule + "/internal/scaffold/template"
	templateGroup  = "notes.scratch.open-control-plane.io"
	templateName   = "notes"
)

// Options say what to create.
type Options struct {
	// Module is the new module's path, e.g. example.com/acme/backups.
	Module string
	// Dir is where to write it; it must not exist or be empty. Default: the last
	// element of Module, in the current folder.
	Dir string
	// Name is the provider's name: its ServiceProvider, ProviderConfig and provider
	// workspace (root:providers:<name>). Default: the last element of Module.
	Name string
	// Group is the Service API's group, also the APIExport's name. Default:
	// <name>.services.open-control-plane.io, openMCP's convention.
	Group string
	// Version of RuntimeModule to require. Default: the version this program was built
	// from (go run .../cmd/kcp-serviceprovider-new@v0.4.0 requires v0.4.0).
	Version string
	// Replace, when set, replaces RuntimeModule with this folder (a checkout of it),
	// for a runtime not released yet.
	Replace string
	// Tidy runs go mod tidy in the new module, which fills in go.mod and go.sum; without
	// it the module is written only.
	Tidy bool
}

// data is what the .tmpl files are rendered with.
type data struct {
	Module, Name, Group, Version, Replace, GoVersion, ControllerGen string
}

// New writes the new module and, with o.Tidy, makes it build. It reports each step to
// log and returns the folder written.
func New(ctx context.Context, o Options, log io.Writer) (string, error) {
	d, dir, err := o.resolve()
	if err != nil {
		return "", err
	}
	if err := checkEmpty(dir); err != nil {
		return "", err
	}
	if err := write(dir, d); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "wrote provider %s (module %s, group %s) to %s\n", d.Name, d.Module, d.Group, dir)
	if !o.Tidy {
		return dir, nil
	}
	fmt.Fprintln(log, "go mod tidy (downloads the runtime's dependencies on a first run)")
	tidy := exec.CommandContext(ctx, "go", "mod", "tidy")
	tidy.Dir, tidy.Stdout, tidy.Stderr = dir, log, log
	if err := tidy.Run(); err != nil {
		return "", fmt.Errorf("go mod tidy in %s: %w", dir, err)
	}
	return dir, nil
}

// resolve fills in the defaults and checks the names.
func (o Options) resolve() (data, string, error) {
	d := data{Module: o.Module, Name: o.Name, Group: o.Group, Version: o.Version, GoVersion: GoVersion, ControllerGen: ControllerGen}
	if d.Module == "" || strings.ContainsAny(d.Module, " \t\n\\") || strings.HasPrefix(d.Module, "/") || strings.HasSuffix(d.Module, "/") {
		return d, "", fmt.Errorf("module path %q: want a Go module path such as example.com/acme/backups", d.Module)
	}
	if d.Name == "" {
		d.Name = path.Base(d.Module)
	}
	if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 {
		return d, "", fmt.Errorf("provider name %q (give one with -name): %s", d.Name, strings.Join(errs, "; "))
	}
	if d.Group == "" {
		d.Group = d.Name + ".services.open-control-plane.io"
	}
	if errs := validation.IsDNS1123Subdomain(d.Group); len(errs) > 0 || !strings.Contains(d.Group, ".") {
		return d, "", fmt.Errorf("API group %q: want a DNS subdomain with a dot, such as %s.services.open-control-plane.io", d.Group, d.Name)
	}
	if o.Replace != "" {
		abs, err := filepath.Abs(o.Replace)
		if err != nil {
			return d, "", err
		}
		d.Replace = abs
	}
	if d.Version == "" {
		d.Version = builtVersion()
	}
	if d.Version == "" {
		if d.Replace == "" {
			return d, "", errors.New("this program was not built from a released version of " + RuntimeModule +
				": run it as go run " + RuntimeModule + "/cmd/kcp-serviceprovider-new@<version>, or pass -replace with a checkout")
		}
		d.Version = "v0.0.0" // any version: the replacement decides
	}
	dir := o.Dir
	if dir == "" {
		dir = d.Name
	}
	dir, err := filepath.Abs(dir)
	return d, dir, err
}

// builtVersion is the version of RuntimeModule this program was built from, or "" for
// a build from a checkout.
func builtVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m.Path == RuntimeModule && m.Replace == nil && strings.HasPrefix(m.Version, "v") {
			return m.Version
		}
	}
	return ""
}

// checkEmpty refuses a folder that holds anything: New never overwrites an author's
// files.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty; give a new folder with -dir", dir)
	}
	return nil
}

// write copies the template into dir: .tmpl files rendered with d (the suffix dropped),
// every other file with the template's module path, group and name rewritten.
func write(dir string, d data) error {
	rewrite := strings.NewReplacer(
		templateModule, d.Module,
		templateGroup, d.Group,
		`providerName = "`+templateName+`"`, `providerName = "`+d.Name+`"`,
		"// Command "+templateName+" ", "// Command "+d.Name+" ",
	)
	return fs.WalkDir(files, "template", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "template/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			t, err := template.New(rel).Option("missingkey=error").Parse(string(raw))
			if err != nil {
				return fmt.Errorf("template %s: %w", rel, err)
			}
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return fmt.Errorf("template %s: %w", rel, err)
			}
			raw = b.Bytes()
		} else {
			raw = []byte(rewrite.Replace(string(raw)))
			rel = strings.ReplaceAll(rel, templateGroup, d.Group) // the CRD files' names
		}
		mode := os.FileMode(0o644)
		if rel == ".ci/run" {
			mode = 0o755
		}
		out := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, raw, mode)
	})
}
