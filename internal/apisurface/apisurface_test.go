package apisurface

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// doc is the page that gives the counts and a reason for every name kept.
const doc = "../../docs/design/api-surface.md"

// TestSurface prints the counts of the root package and of scripts (run it
// with -v) and holds docs/design/api-surface.md to them: the counts in its
// first table are today's, and every exported name has a row there, with
// each field or interface method named in its type's row, and no row
// names what is gone.
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
		if strings.HasSuffix(section, "scripts") {
			name = "scripts." + name
		}
		rows[name] = m[2]
	}
	seen := map[string]bool{}
	for _, p := range []struct{ dir, label, prefix string }{{"../..", "`redisrate` (root)", ""}, {"../../scripts", "`scripts`", "scripts."}} {
		names, err := Names(p.dir)
		if err != nil {
			t.Fatal(err)
		}
		c := Counts(names)
		figure := fmt.Sprintf("%d names, %d fields", len(names)-c["field"], c["field"])
		t.Logf("%s: %s (types %d, funcs %d, methods %d, consts %d, vars %d)", p.label, figure, c["type"], c["func"], c["method"], c["const"], c["var"])
		if !regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(p.label) + ` \|.*\*\*` + figure + `\*\* \|$`).Match(text) {
			t.Errorf("%s: the count row of %s does not say **%s**", doc, p.label, figure)
		}
		for _, n := range names {
			full := p.prefix + n.Name
			if n.Kind != "field" {
				if _, ok := rows[full]; !ok {
					t.Errorf("%s %s has no row in %s: add one with why a user needs it", n.Kind, full, doc)
				}
				seen[full] = true
				continue
			}
			typ, field, _ := strings.Cut(n.Name, ".")
			if r := rows[p.prefix+typ]; !strings.Contains(r, "`"+field+"`") {
				t.Errorf("%s: the row of %s does not name its field (or method) %s", doc, p.prefix+typ, field)
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
