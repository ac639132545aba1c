package assemble

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

func parseTemplates(t *testing.T, text string) *templates {
	t.Helper()
	tm := &templates{file: "t.lua", defs: map[string]map[string]string{}}
	if err := tm.parse(strings.Split(text, "\n")); err != nil {
		t.Fatal(err)
	}
	return tm
}

// A definition runs to the next blank line; one for kinds is theirs, one
// without is every other kind's; @name@ is another definition, for the
// same kind; comments between definitions are not part of any.
func TestTemplatesDefineKindsAndReferences(t *testing.T) {
	tm := parseTemplates(t, `-- a file's comment
--@define max -- a comment on the line
9007199254740991

-- a comment for the next one
--@define max time big
TIME_MAX
--@define check
s@k@ <= @max@
and more
--@define empty
`)
	for _, c := range []struct{ name, kind, want string }{
		{"max", "", "9007199254740991"},
		{"max", "signed", "9007199254740991"},
		{"max", "big", "TIME_MAX"},
		{"check", "time", "s@k@ <= TIME_MAX\nand more"},
		{"check", "", "s@k@ <= 9007199254740991\nand more"},
		{"empty", "", ""},
	} {
		if got := tm.get(c.name, c.kind); got != c.want {
			t.Errorf("get(%q, %q) = %q, want %q", c.name, c.kind, got, c.want)
		}
	}
	if tm.err != nil {
		t.Fatal(tm.err)
	}
	if got := strings.Join(tm.kinds("max"), ","); got != ",big,time" {
		t.Errorf("kinds(max) = %q", got)
	}
}

func TestTemplatesRefuseFaults(t *testing.T) {
	for name, text := range map[string]string{
		"Lua outside a definition": "--@define a\nx\n\nlocal y = 1\n",
		"a definition twice":       "--@define a\nx\n--@define a\ny\n",
		"a kind twice":             "--@define a big\nx\n--@define a time big\ny\n",
		"a define without a name":  "--@define \nx\n",
		"a misspelled kind":        "--@define a bigg\nx\n", // get would pass over it for the default
	} {
		tm := &templates{file: "t.lua", defs: map[string]map[string]string{}}
		if err := tm.parse(strings.Split(text, "\n")); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
	tm := parseTemplates(t, "--@define a\n@b@\n--@define b\n@a@\n--@define c signed\nx\n")
	for _, name := range []string{"missing", "c", "a"} { // none, no default, a circle
		tm.err = nil
		tm.get(name, "")
		if tm.err == nil {
			t.Errorf("get(%q) kept no error", name)
		}
	}
}

// Each macro is written out as a script and as the library write it.
func TestMacrosForScriptAndLibrary(t *testing.T) {
	g := toyGenerator(t, nil)
	a := Algorithm{Fields: 1, TimeAt: 1}
	lines := []string{"local x, t = @read(s)@, @clock(secs)@", "p = @FULL(n)@"}
	want := map[string][]string{
		script: {"local x, t = #s < 16 and find(s, '^[1-9]%d*$') and s + 0 or whole(s), secs",
			"p = '^' .. TAG .. ('').rep(' ([1-9]%d*)', n) .. '$'"},
		library: {"local x, t = NUM[s] or read(s), (NUM[secs] or read(secs))", "p = FULL[n]"},
	}
	for kind, w := range want {
		if got := g.expandMacros(lines, kind, g.values(a)); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", kind, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	g.expandMacros([]string{"@nosuch(x)@"}, script, nil)
	if g.err() == nil {
		t.Error("a macro macros.lua does not define: no error")
	}
}

// Every file in scripts/src counts: without it, the generator fails or
// writes other files. A source nothing reads is a section or template left
// behind.
func TestEverySourceCounts(t *testing.T) {
	src := sourceFS(t)
	want, err := Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedNames(src) {
		file := src[name]
		delete(src, name)
		if got, err := Generate(src); err == nil && reflect.DeepEqual(got, want) {
			t.Errorf("scripts/src/%s: the generator writes the same files without it", name)
		}
		src[name] = file
	}
}

// A template's slip fails the generator instead of shipping in a script:
// a definition nothing uses any more, or a placeholder misspelled, which
// would otherwise reach the scripts as text (a misspelled kind is
// TestTemplatesRefuseFaults').
func TestGeneratorRefusesTemplateSlips(t *testing.T) {
	for name, c := range map[string]struct{ file, old, new, want string }{
		"an unused definition":     {"fields.lua", "--@define keep\n", "--@define orphan\nx\n\n--@define keep\n", "--@define orphan is never written out"},
		"a misspelled placeholder": {"header.lua", "from 1 to @MAX_LIMIT_TEXT@", "from 1 to @MAX_LIMIT_TXT@", "a placeholder the generator did not fill"},
	} {
		src := sourceFS(t)
		text := string(src[c.file].Data)
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s: %s holds no %q", name, c.file, c.old)
		}
		src[c.file] = &fstest.MapFile{Data: []byte(strings.Replace(text, c.old, c.new, 1))}
		if _, err := Generate(src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, c.want)
		}
	}
}

// sourceFS is scripts/src, in memory.
func sourceFS(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	names, err := fs.Glob(os.DirFS("../../src"), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join("..", "..", "src", name))
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: text}
	}
	return fsys
}

func sortedNames(m fstest.MapFS) []string {
	var names []string
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
