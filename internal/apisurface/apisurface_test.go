package apisurface

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// doc is the page that gives the counts and a reason for every name kept.
const doc = "../../docs/design/api-surface.md"

// The budget of issue 39: names (types, funcs, methods, consts, vars) and
// fields (of exported structs, and the methods of exported interfaces,
// counted with them to be strict) across every public package, and the
// root package's names.
const (
	maxNames     = 185
	maxFields    = 112
	maxRootNames = 96
)

// public are the public packages, by directory from the repository's root,
// with their labels in the doc's count table: every package outside
// internal/, cmd/, bench/, examples/ and integration_test/, the nested
// modules (grpclimit, otelrate) included. TestPublicPackages holds the
// list to the tree.
var public = []struct{ dir, label string }{
	{".", "`redisrate` (root)"},
	{"scripts", "`scripts`"},
	{"ratecore", "`ratecore`"},
	{"httplimit", "`httplimit`"},
	{"grpclimit", "`grpclimit`"},
	{"otelrate", "`otelrate`"},
	{"localredis", "`localredis`"},
}

// TestPublicPackages fails when a package is public and not in public (a
// new package would escape the budget), or public names a directory with
// no package.
func TestPublicPackages(t *testing.T) {
	found := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			first, _, _ := strings.Cut(rel, "/")
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"),
				slices.Contains([]string{"cmd", "bench", "examples", "integration_test"}, first),
				slices.Contains(strings.Split(rel, "/"), "internal"):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			found[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range public {
		if !found[p.dir] {
			t.Errorf("public lists %s, which holds no package", p.dir)
		}
		delete(found, p.dir)
	}
	for dir := range found {
		t.Errorf("%s is a public package that the budget does not count: add it to public (and its row to %s), or move it under internal/", dir, doc)
	}
}

// TestBudget holds the public packages to the budget of issue 39, and the
// count table of docs/design/api-surface.md to the counts: a row per
// package and one for them all, each saying today's figures in bold.
// Run it with -v for the counts.
func TestBudget(t *testing.T) {
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var names, fields int
	for _, p := range public {
		got, err := Names(filepath.Join("../..", p.dir))
		if err != nil {
			t.Fatal(err)
		}
		c := Counts(got)
		n, f := len(got)-c["field"], c["field"]
		names, fields = names+n, fields+f
		figure := fmt.Sprintf("%d names, %d fields", n, f)
		t.Logf("%s: %s (types %d, funcs %d, methods %d, consts %d, vars %d)", p.label, figure, c["type"], c["func"], c["method"], c["const"], c["var"])
		if !countRow(p.label, figure).Match(text) {
			t.Errorf("%s: the count row of %s does not say **%s**", doc, p.label, figure)
		}
		if p.dir == "." && n > maxRootNames {
			t.Errorf("the root package exports %d names: the budget is %d (issue 39)", n, maxRootNames)
		}
	}
	figure := fmt.Sprintf("%d names, %d fields", names, fields)
	t.Logf("all public packages: %s (budget: %d names, %d fields)", figure, maxNames, maxFields)
	if names > maxNames || fields > maxFields {
		t.Errorf("the public packages export %s: the budget is %d names and %d fields (issue 39); make room before adding", figure, maxNames, maxFields)
	}
	if !countRow("all public packages", figure).Match(text) {
		t.Errorf("%s: the count row of all public packages does not say **%s**", doc, figure)
	}
}

// countRow matches the row of label in the doc's count table, whose last
// cell is figure in bold.
func countRow(label, figure string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(label) + ` \|.*\*\*` + regexp.QuoteMeta(figure) + `\*\* \|$`)
}

// TestSurface holds docs/design/api-surface.md to the names of every public
// package: every exported name has a row in its package's "Kept" section,
// with each field or interface method named in its type's row, and no row
// names what is gone. (TestBudget checks the counts.)
func TestSurface(t *testing.T) {
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // "scripts.Spec" or "Limiter.Allow": the rest of its row
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\|(.*)$")
	section := ""
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = line
		}
		m := row.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(section, "## Kept") {
			continue
		}
		name := m[1]
		if pkg := strings.TrimPrefix(section, "## Kept: "); pkg != "root package" {
			name = pkg + "." + name
		}
		rows[name] = m[2]
	}
	seen := map[string]bool{}
	for _, p := range public {
		names, err := Names(filepath.Join("../..", p.dir))
		if err != nil {
			t.Fatal(err)
		}
		prefix := p.dir + "."
		if p.dir == "." {
			prefix = ""
		}
		for _, n := range names {
			full := prefix + n.Name
			if n.Kind != "field" {
				if _, ok := rows[full]; !ok {
					t.Errorf("%s %s has no row in %s: add one with why a user needs it", n.Kind, full, doc)
				}
				seen[full] = true
				continue
			}
			typ, field, _ := strings.Cut(n.Name, ".")
			if r := rows[prefix+typ]; !strings.Contains(r, "`"+field+"`") {
				t.Errorf("%s: the row of %s does not name its field (or method) %s", doc, prefix+typ, field)
			}
		}
	}
	for name := range rows {
		if seen[name] {
			continue
		}
		t.Errorf("%s has a row for %s, which is not exported", doc, name)
	}
}
