package main

import (
	"os"
	"strings"
	"testing"
)

const fixture = `# x

## Layout

| folder | what |
|---|---|
| **binaries and commands** | |
| ` + "`cmd/app/`" + ` | the binary |
| **the modes** | |
| ` + "`modes/`" + ` | a mode |
| ` + "`internal/engine/`" + ` | the engine |
| **leaves** | |
| ` + "`leaf/`" + ` | a leaf |
| **manifests, tests, scripts** | |
| ` + "`config/`" + ` | manifests |
| ` + "`test/e2e/`" + ` | a suite |

## Next
`

// TestCheck is the rule on a fixture table: down the table passes; up the table, into
// tests, or out of the table fails.
func TestCheck(t *testing.T) {
	rows, err := parseTable(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 || !rows[3].product || rows[4].product {
		t.Fatalf("rows %+v", rows)
	}
	const mod = "example.com/m"
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    string // "" for no problem, else a part of the one problem
	}{
		{"down the table", map[string][]string{mod + "/cmd/app": {mod + "/modes", mod + "/leaf", mod + "/config", "fmt"}, mod + "/modes": {mod + "/internal/engine"}}, ""},
		{"within a row", map[string][]string{mod + "/modes/a": {mod + "/modes/b"}}, ""},
		{"tests use every layer", map[string][]string{mod + "/test/e2e": {mod + "/cmd/app", mod + "/leaf"}}, ""},
		{"up the table", map[string][]string{mod + "/leaf": {mod + "/modes"}}, "which is above it"},
		{"shipped code importing a test", map[string][]string{mod + "/modes": {mod + "/test/e2e"}}, "(shipped code) imports test/e2e"},
		{"a package without a row", map[string][]string{mod + "/stray": nil}, "stray has no row"},
		{"importing a package without a row", map[string][]string{mod + "/modes": {mod + "/stray"}}, "imports stray, which has no row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(rows, mod, tc.imports)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}

// TestReadmeTable reads the repository's own table (docs/layout.md; it was the
// README's): it has the layers the rule needs.
func TestReadmeTable(t *testing.T) {
	f, err := os.Open("../../docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rows, err := parseTable(f)
	if err != nil {
		t.Fatal(err)
	}
	var product, other int
	for _, r := range rows {
		if r.product {
			product++
		} else {
			other++
		}
	}
	if product < 10 || other == 0 {
		t.Errorf("docs/layout.md's table: %d shipped rows, %d others", product, other)
	}
}
