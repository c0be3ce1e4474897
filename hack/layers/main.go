// Command layers checks the layer rule of docs/layout.md: in the table under
// "## Layout", a package's imports of this module run only down the table (to its own
// row or a row below), no package of the rows above "manifests, tests, scripts"
// imports test/ or hack/, and every package of the module has a row. `make lint` runs
// it.
//
// Usage: go run ./hack/layers [-table docs/layout.md] (from the module root).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

func main() {
	file := flag.String("table", "docs/layout.md", "the Markdown file whose \"## Layout\" table holds the layers")
	flag.Parse()
	raw, err := os.ReadFile(*file)
	if err != nil {
		fail(err)
	}
	table, err := parseTable(bytes.NewReader(raw))
	if err != nil {
		fail(fmt.Errorf("%s: %w", *file, err))
	}
	mod, imports, err := goList()
	if err != nil {
		fail(err)
	}
	if problems := check(table, mod, imports); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "layers: "+p)
		}
		fmt.Fprintf(os.Stderr, "layers: %d problem(s); the rule and the table are in %s, \"## Layout\"\n", len(problems), *file)
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "layers:", err)
	os.Exit(2)
}

// row is one folder of the layout table.
type row struct {
	index  int
	folder string // with a trailing slash
	// product says the row is above "manifests, tests, scripts": code that ships.
	product bool
}

var (
	folderCell  = regexp.MustCompile("^\\|\\s*`([^`]+/)`\\s*\\|")
	headingCell = regexp.MustCompile(`^\|\s*\*\*([^*]+)\*\*\s*\|`)
)

// testsHeading starts the rows that are not layered code.
const testsHeading = "manifests, tests, scripts"

// parseTable reads the folder rows of the table under "## Layout".
func parseTable(r io.Reader) ([]row, error) {
	var rows []row
	in, product := false, true
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "Layout"
			continue
		case !in:
			continue
		}
		if m := headingCell.FindStringSubmatch(line); m != nil {
			if m[1] == testsHeading {
				product = false
			}
			continue
		}
		if m := folderCell.FindStringSubmatch(line); m != nil {
			rows = append(rows, row{index: len(rows), folder: m[1], product: product})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New(`no folder rows in a "## Layout" table`)
	}
	return rows, nil
}

// goList returns the module path and, by package, its imports (not its tests').
func goList() (string, map[string][]string, error) {
	out, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -m: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	out, err = exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list ./...: %w", err)
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	return mod, imports, sc.Err()
}

// rowOf is the row of the folder holding the module-relative package path rel: the
// longest folder that is a prefix of it.
func rowOf(rows []row, rel string) (row, bool) {
	best, found := row{}, false
	for _, r := range rows {
		if strings.HasPrefix(rel+"/", r.folder) && (!found || len(r.folder) > len(best.folder)) {
			best, found = r, true
		}
	}
	return best, found
}

// check returns every breach of the rule, sorted.
func check(rows []row, mod string, imports map[string][]string) []string {
	var problems []string
	rel := func(pkg string) (string, bool) {
		if pkg == mod {
			return ".", true
		}
		r, ok := strings.CutPrefix(pkg, mod+"/")
		return r, ok
	}
	for pkg, imps := range imports {
		from, ok := rel(pkg)
		if !ok {
			continue
		}
		fromRow, ok := rowOf(rows, from)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no row in the layout table", from))
			continue
		}
		if !fromRow.product {
			continue // tests and scripts may use every layer
		}
		for _, imp := range imps {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			toRow, ok := rowOf(rows, to)
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s imports %s, which has no row in the layout table", from, to))
			case !toRow.product && !strings.HasPrefix(toRow.folder, "config/"):
				problems = append(problems, fmt.Sprintf("%s (shipped code) imports %s (%s)", from, to, toRow.folder))
			case toRow.index < fromRow.index:
				problems = append(problems, fmt.Sprintf("%s (row %s) imports %s, which is above it (row %s)", from, fromRow.folder, to, toRow.folder))
			}
		}
	}
	sort.Strings(problems)
	return problems
}
