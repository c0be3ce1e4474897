package scaffold

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPinsFollowThisModule keeps a new module's go directive and controller-gen version
// those of this module, so its generated files equal the template's.
func TestPinsFollowThisModule(t *testing.T) {
	if got := lineField(t, "../../go.mod", "go "); got != GoVersion {
		t.Errorf("go.mod says go %s, GoVersion is %s", got, GoVersion)
	}
	if got := lineField(t, "../../hack/tools/codegen/go.mod", "sigs.k8s.io/controller-tools "); got != ControllerGen {
		t.Errorf("hack/tools/codegen pins controller-tools %s, ControllerGen is %s", got, ControllerGen)
	}
}

// TestNewRewritesTheTemplate writes a module and checks that nothing of the template's
// names is left in it, that the rendered files are what a module needs, and that every
// Go file parses.
func TestNewRewritesTheTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	got, err := New(t.Context(), Options{Module: "example.com/acme/backups", Dir: dir, Replace: "/src/kcp-serviceprovider"}, os.Stderr)
	if err != nil || got != dir {
		t.Fatalf("New: %q, %v", got, err)
	}
	var names []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, left := range []string{templateModule, templateGroup, "{{.", "providerName = \"notes\"", "root:providers:notes"} {
			if bytes.Contains(raw, []byte(left)) {
				t.Errorf("%s still holds %q", rel, left)
			}
		}
		if strings.HasSuffix(rel, ".tmpl") {
			t.Errorf("%s kept its .tmpl suffix", rel)
		}
		if strings.HasSuffix(rel, ".go") {
			if _, err := parser.ParseFile(token.NewFileSet(), p, raw, parser.AllErrors); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "Makefile", ".ci/run", "README.md", "main.go", "provider.go", "local.go", "e2e_test.go",
		"api/v1alpha1/types.go", "api/v1alpha1/zz_generated.deepcopy.go", "config/apibinding.yaml", "config/samples/note.yaml",
		"crd/backups.services.open-control-plane.io_notes.yaml", "crd/backups.services.open-control-plane.io_noteconfigs.yaml"} {
		if !slices.Contains(names, filepath.FromSlash(want)) {
			t.Errorf("the new module lacks %s; it holds %v", want, names)
		}
	}
	gomod := read(t, filepath.Join(dir, "go.mod"))
	for _, want := range []string{"module example.com/acme/backups\n", "go " + GoVersion + "\n",
		"require " + RuntimeModule + " v0.0.0\n", "replace " + RuntimeModule + " => /src/kcp-serviceprovider\n",
		"exclude github.com/kcp-dev/multicluster-provider/client v0.0.0-00010101000000-000000000000\n"} {
		if !strings.Contains(gomod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	if !strings.Contains(read(t, filepath.Join(dir, "main.go")), `providerName = "backups"`) {
		t.Error(`main.go does not name the provider "backups"`)
	}
	if info, err := os.Stat(filepath.Join(dir, ".ci", "run")); err != nil || info.Mode()&0o111 == 0 {
		t.Errorf(".ci/run is not executable: %v", err)
	}
}

// TestNewRefuses checks the answers to bad input: nothing is written.
func TestNewRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"a folder that holds files", Options{Module: "example.com/a", Dir: full, Replace: "/src"}, "is not empty"},
		{"no module path", Options{Dir: t.TempDir()}, "module path"},
		{"a name that is no DNS label", Options{Module: "example.com/Acme_Backups", Dir: t.TempDir(), Replace: "/src"}, "provider name"},
		{"a group without a dot", Options{Module: "example.com/b", Group: "backups", Dir: t.TempDir(), Replace: "/src"}, "API group"},
		{"no released version and no checkout", Options{Module: "example.com/c", Dir: t.TempDir()}, "released version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(t.Context(), tc.o, os.Stderr); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("the full folder holds %d entries after a refusal, want its one file", len(entries))
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// lineField is the second field of the first line of file starting with prefix.
func lineField(t *testing.T, file, prefix string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(read(t, file)))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			return strings.Fields(line)[1]
		}
	}
	t.Fatalf("%s has no line starting with %q", file, prefix)
	return ""
}
