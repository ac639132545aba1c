package assemble

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// The generator's rules, each stated by a tiny source in and the lines it
// must write out: what the real sources in scripts/src rely on.

// toy is a one-field algorithm with a fast copy: its loop, the binding
// limit's choice and a mode only the general code takes are marked for the
// general code alone; the copy has its own record line, with the tag.
const toy = `--! id: 0
--! go: Toy
--! name: toy
--! tag: toy:1
--! fields: 1
--! window: false
--! time_field: 0
--! time_unit: us
--! range:
--! max_limit: 9
--! fast: true
--! summary: a toy
-- Algorithm: a toy.
local function top() end
--@body
--@include shared.lua
--@fast begin
--@if general
for i = 1, n do
--@end
  local x = s1
--@if general
  if settle then x = 0 end
--@include verdict.lua
  out = out .. fmt(' %d', x)
end
--@else
  local out = fmt('@TAG@ %d', x)
--@end
--@fast end
--@include tail.lua
`

// templateFiles is the files of scripts/src every generator reads besides
// the algorithms: the template files and the shared text.
var templateFiles = []string{"header.lua", "constants.lua", "fields.lua", "macros.lua", "tables.lua", "strings.lua", "helpers.lua"}

// toyFS is the toy algorithm's sources, with the real template files.
func toyFS(t *testing.T) fstest.MapFS {
	t.Helper()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	fsys := fstest.MapFS{
		"toy.lua":        file(toy),
		"shared.lua":     file("local s1 = read() --@each field\n--@if window\nwindowed()\n--@else\nbucket()\n--@end\n"),
		"verdict.lua":    file("  choose(i)\n"),
		"tail.lua":       file("reply()\n"),
		"fast.lua":       file("repeat -- GENERATED COPY\n"),
		"fast_reply.lua": file("  return out\nuntil true\n"),
	}
	for _, name := range templateFiles {
		text, err := os.ReadFile(filepath.Join("..", "..", "src", name))
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = file(string(text))
	}
	return fsys
}

// toyGenerator is a generator of toy's sources, or of fsys when given.
func toyGenerator(t *testing.T, fsys fstest.MapFS) *generator {
	t.Helper()
	if fsys == nil {
		fsys = toyFS(t)
	}
	g, err := newGenerator(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestParseWritesGeneralCodeAndFastCopy(t *testing.T) {
	a, err := toyGenerator(t, nil).parse("toy.lua", []byte(toy))
	if err != nil {
		t.Fatal(err)
	}
	wantBody := []string{
		"local s1 = read()", // --@each field: once per field, s@k@ as s1
		"bucket()",          // --@if window: false
		"for i = 1, n do",
		"  local x = s1",
		"  if settle then x = 0 end",
		"  choose(i)",
		"  out = out .. fmt(' %d', x)",
		"end",
		"reply()",
	}
	if got := strings.Join(a.Body, "\n"); got != strings.Join(wantBody, "\n") {
		t.Errorf("general code:\n%s\nwant:\n%s", got, strings.Join(wantBody, "\n"))
	}
	wantFast := []string{
		"repeat -- GENERATED COPY",
		"  local x = s1",
		"  local out = fmt('toy:1 %d', x)", // @TAG@ written as the tag
		"  return out",
		"until true",
	}
	if got := strings.Join(a.Fast, "\n"); got != strings.Join(wantFast, "\n") {
		t.Errorf("fast copy:\n%s\nwant:\n%s", got, strings.Join(wantFast, "\n"))
	}
	if got := strings.Join(a.Top, "\n"); got != "local function top() end" {
		t.Errorf("top: %q", got)
	}
}

func TestParseRefusesBrokenMarkers(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"fast without a region": func(s string) string {
			return strings.NewReplacer("--@fast begin\n", "", "--@fast end\n", "").Replace(s)
		},
		"a begin without an end": func(s string) string { return strings.Replace(s, "--@fast end\n", "", 1) },
		"an end without a begin": func(s string) string { return strings.Replace(s, "--@fast begin\n", "", 1) },
		"two regions":            func(s string) string { return s + "--@fast begin\n--@fast end\n" },
		"an unknown flag": func(s string) string {
			return strings.Replace(s, "--@if general\n  if settle", "--@if generl\n  if settle", 1)
		},
		"an --@if left open": func(s string) string { return strings.Replace(s, "--@end\n--@fast end", "--@fast end", 1) },
		"no --@body":         func(s string) string { return strings.Replace(s, "--@body\n", "", 1) },
		"a manifest line missing": func(s string) string {
			return strings.Replace(s, "--! fields: 1\n", "", 1)
		},
	} {
		src := edit(toy)
		fsys := toyFS(t)
		fsys["toy.lua"] = &fstest.MapFile{Data: []byte(src)}
		if _, err := toyGenerator(t, fsys).parse("toy.lua", []byte(src)); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
}

func TestPerFieldWritesEachField(t *testing.T) {
	a := Algorithm{Fields: 3, TimeAt: 2, Signed: 1}
	got := toyGenerator(t, nil).perField(a, []string{
		"local @stored@ = @texts@",
		"check(s@k@, @max@, @digits@) --@each field",
		"zero(@zero_s@) --@each field",
		"x = '(@number@)'",
	}, false)
	want := []string{
		"local s1, s2, s3 = t1, t2, t3",
		"check(s1, 9007199254740991, 17)", // signed: a sign and 16 digits
		"check(s2, TIME_MAX, 16)",         // the recorded time
		"check(s3, 9007199254740991, 16)",
		"zero((#t1 == 1 or s1 >= 10 ^ (#t1 - 1) or -s1 >= 10 ^ (#t1 - 2)) and -s1 <= 9007199254740991 and s1)",
		"zero((#t2 == 1 or s2 >= 10 ^ (#t2 - 1)) and s2)",
		"zero((#t3 == 1 or s3 >= 10 ^ (#t3 - 1)) and s3)",
		"x = '(%-?%d+)'", // a state with a signed field: numbers may carry a sign
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLimitPatternPerField(t *testing.T) {
	g := toyGenerator(t, nil)
	for _, c := range []struct {
		a    Algorithm
		want string
	}{
		{Algorithm{Fields: 2, TimeAt: 2}, " (%d+) ([1-9]%d*)"},
		{Algorithm{Fields: 2, TimeAt: 2, Signed: 1}, " (%-?%d+) ([1-9]%d*)"},
		{Algorithm{Fields: 3, TimeAt: 1}, " ([1-9]%d*) (%d+) (%d+)"},
	} {
		if got := g.limitPattern(c.a); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}
