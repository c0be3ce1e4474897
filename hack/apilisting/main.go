// Command apilisting prints the exported API of the packages a provider author
// imports, one declaration per line, sorted, in the manner of Go's own api/ files:
// `make generate` writes it to api/exported.txt and `make verify` fails when the code
// and the listing differ, so that every change of the author's API shows in review.
//
// It reads the compiler's export data (go list -export), so it needs nothing beyond
// the Go distribution, and reports an exported declaration that names a type of an
// internal package: an author can see such a type but not name it.
//
// Usage: go run ./hack/apilisting [package ...] (from the module root; the default is
// the author packages).
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// authorPackages are the packages a provider author imports (docs/layout.md marks
// their rooms **author**).
var authorPackages = []string{
	"api/v1alpha1", "provider", "cluster", "builder", "command", "command/local", "testkit", "migration",
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apilisting:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	mod, err := goOutput("list", "-m")
	if err != nil {
		return err
	}
	mod = strings.TrimSpace(mod)
	paths := args
	if len(paths) == 0 {
		for _, p := range authorPackages {
			paths = append(paths, mod+"/"+p)
		}
	}
	exports, err := exportData(paths)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var lines, problems []string
	for _, path := range paths {
		pkg, err := imp.Import(path)
		if err != nil {
			return fmt.Errorf("importing %s: %w", path, err)
		}
		l := listing{pkg: pkg, prefix: "pkg " + strings.TrimPrefix(path, mod+"/") + ", "}
		l.list()
		lines = append(lines, l.lines...)
		problems = append(problems, l.problems...)
	}
	slices.Sort(lines)
	w := bufio.NewWriter(out)
	for _, line := range slices.Compact(lines) {
		fmt.Fprintln(w, line)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%d exported declaration(s) name an internal type:\n  %s", len(problems), strings.Join(slices.Compact(problems), "\n  "))
	}
	return nil
}

// exportData maps each package the listed ones depend on to its export data file.
func exportData(paths []string) (map[string]string, error) {
	out, err := goOutput(append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}, paths...)...)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if path, file, ok := strings.Cut(line, " "); ok && file != "" {
			m[path] = file
		}
	}
	return m, nil
}

func goOutput(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args[:2], " "), err, stderr.String())
	}
	return string(out), nil
}

// listing collects one package's lines.
type listing struct {
	pkg      *types.Package
	prefix   string
	lines    []string
	problems []string
}

func (l *listing) add(decl string, types_ ...types.Type) {
	line := l.prefix + decl
	l.lines = append(l.lines, line)
	for _, t := range types_ {
		if p := internalIn(t, l.pkg, map[types.Type]bool{}); p != "" {
			l.problems = append(l.problems, line+" (names "+p+")")
		}
	}
}

// qualifier names other packages by their name, as Go's api files do.
func (l *listing) qualifier(p *types.Package) string {
	if p == l.pkg {
		return ""
	}
	return p.Name()
}

func (l *listing) str(t types.Type) string { return types.TypeString(t, l.qualifier) }

func (l *listing) list() {
	scope := l.pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			l.add(fmt.Sprintf("const %s %s = %s", name, l.str(o.Type()), o.Val().ExactString()), o.Type())
		case *types.Var:
			l.add(fmt.Sprintf("var %s %s", name, l.str(o.Type())), o.Type())
		case *types.Func:
			sig := o.Type().(*types.Signature)
			l.add("func "+name+l.signature(sig), sig)
		case *types.TypeName:
			l.typeName(o)
		}
	}
}

func (l *listing) signature(sig *types.Signature) string {
	var b strings.Builder
	if tp := sig.TypeParams(); tp != nil && tp.Len() > 0 {
		b.WriteString(l.typeParams(tp))
	}
	// TypeString of a signature starts with "func"; drop it.
	b.WriteString(strings.TrimPrefix(types.TypeString(types.NewSignatureType(nil, nil, nil, sig.Params(), sig.Results(), sig.Variadic()), l.qualifier), "func"))
	return b.String()
}

func (l *listing) typeParams(tp *types.TypeParamList) string {
	var parts []string
	for i := range tp.Len() {
		p := tp.At(i)
		parts = append(parts, p.Obj().Name()+" "+l.str(p.Constraint()))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (l *listing) typeName(o *types.TypeName) {
	name := o.Name()
	if o.IsAlias() {
		l.add(fmt.Sprintf("type %s = %s", name, l.str(o.Type())), o.Type())
		return
	}
	named, ok := o.Type().(*types.Named)
	if !ok {
		return
	}
	decl := name
	if tp := named.TypeParams(); tp != nil && tp.Len() > 0 {
		decl += l.typeParams(tp)
	}
	switch u := named.Underlying().(type) {
	case *types.Struct:
		l.add("type " + decl + " struct")
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				l.add(fmt.Sprintf("type %s struct, embedded %s", decl, l.str(f.Type())), f.Type())
				continue
			}
			l.add(fmt.Sprintf("type %s struct, %s %s", decl, f.Name(), l.str(f.Type())), f.Type())
		}
	case *types.Interface:
		l.add("type " + decl + " interface")
		for i := range u.NumExplicitMethods() {
			m := u.ExplicitMethod(i)
			if m.Exported() {
				l.add(fmt.Sprintf("type %s interface, %s%s", decl, m.Name(), l.signature(m.Type().(*types.Signature))), m.Type())
			}
		}
		for i := range u.NumEmbeddeds() {
			l.add(fmt.Sprintf("type %s interface, embedded %s", decl, l.str(u.EmbeddedType(i))), u.EmbeddedType(i))
		}
	default:
		l.add(fmt.Sprintf("type %s %s", decl, l.str(u)), u)
	}
	for i := range named.NumMethods() {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		recv := name
		if tp := named.TypeParams(); tp != nil && tp.Len() > 0 {
			var ps []string
			for j := range tp.Len() {
				ps = append(ps, tp.At(j).Obj().Name())
			}
			recv += "[" + strings.Join(ps, ", ") + "]"
		}
		if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
			recv = "*" + recv
		}
		l.add(fmt.Sprintf("method (%s) %s%s", recv, m.Name(), l.signature(sig)), sig)
	}
}

// internalIn returns the first type of an internal package (other than from's own
// tree) that t names, directly or in its signature, fields or elements; "" when none.
// Named types of other packages are not looked into: their own listing covers them.
func internalIn(t types.Type, from *types.Package, seen map[types.Type]bool) string {
	if t == nil || seen[t] {
		return ""
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && p != from && isInternal(p.Path()) {
			return p.Path() + "." + t.Obj().Name()
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				if s := internalIn(args.At(i), from, seen); s != "" {
					return s
				}
			}
		}
		return ""
	case *types.Alias:
		return internalIn(types.Unalias(t), from, seen)
	case *types.Pointer:
		return internalIn(t.Elem(), from, seen)
	case *types.Slice:
		return internalIn(t.Elem(), from, seen)
	case *types.Array:
		return internalIn(t.Elem(), from, seen)
	case *types.Map:
		if s := internalIn(t.Key(), from, seen); s != "" {
			return s
		}
		return internalIn(t.Elem(), from, seen)
	case *types.Chan:
		return internalIn(t.Elem(), from, seen)
	case *types.Signature:
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tuple.Len() {
				if s := internalIn(tuple.At(i).Type(), from, seen); s != "" {
					return s
				}
			}
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if t.Field(i).Exported() {
				if s := internalIn(t.Field(i).Type(), from, seen); s != "" {
					return s
				}
			}
		}
	}
	return ""
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}
