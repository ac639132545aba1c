package modules

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, where the root module's go.mod is.
const root = "../.."

// module is one Go module of the repository.
type module struct {
	dir  string // relative to root, "." for the root module
	path string // its module path
}

// modules finds every go.mod of the repository, in the directories the go
// command would see (not testdata, node_modules, or names starting with "."
// or "_").
func modules(t *testing.T) []module {
	t.Helper()
	var mods []module
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		m := directives(t, path)["module"]
		if len(m) != 1 {
			t.Fatalf("%s: %d module directives", path, len(m))
		}
		mods = append(mods, module{dir: filepath.ToSlash(dir), path: m[0]})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.dir, b.dir) }) // "." first
	if len(mods) == 0 || mods[0].dir != "." {
		t.Fatalf("no go.mod at the repository's root (%s)", root)
	}
	return mods
}

func skipDir(name string) bool {
	return name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// directives reads a go.mod or go.work file: the arguments of each
// directive by keyword, one string per directive, blocks ("replace ( ... )")
// included. Comments are dropped.
func directives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	block := ""
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case block != "" && line == ")":
			block = ""
		case block != "":
			out[block] = append(out[block], line)
		case strings.HasSuffix(line, "("):
			block = strings.TrimSpace(strings.TrimSuffix(line, "("))
		default:
			keyword, args, _ := strings.Cut(line, " ")
			out[keyword] = append(out[keyword], strings.TrimSpace(args))
		}
	}
	if block != "" {
		t.Fatalf("%s: the %s block is not closed", path, block)
	}
	return out
}

// A replace directive is ignored outside the module that holds it: a
// published go.mod with one builds here and nowhere else. go.work says where
// the workspace's modules are instead.
func TestNoReplaceInGoMod(t *testing.T) {
	for _, m := range modules(t) {
		for _, r := range directives(t, filepath.Join(root, m.dir, "go.mod"))["replace"] {
			t.Errorf("%s/go.mod: replace %s: a replace directive is ignored where the module is required; go.work holds what the workspace needs", m.dir, r)
		}
	}
}

// go.work, the Makefile's MODULES (which make test and make check, and so
// CI, go through) and the go.mod files name the same modules.
func TestEveryModuleListed(t *testing.T) {
	var dirs []string
	for _, m := range modules(t) {
		dirs = append(dirs, m.dir)
	}
	var used []string
	for _, u := range directives(t, filepath.Join(root, "go.work"))["use"] {
		used = append(used, filepath.ToSlash(filepath.Clean(u)))
	}
	slices.Sort(dirs)
	slices.Sort(used)
	if !slices.Equal(used, dirs) {
		t.Errorf("go.work uses %q; the go.mod files are in %q: go work use ./DIR", used, dirs)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`(?m)^MODULES\s*:?=(.*)$`).FindSubmatch(makefile)
	if match == nil {
		t.Fatal("the Makefile has no MODULES := line")
	}
	listed := strings.Fields(string(match[1]))
	slices.Sort(listed)
	if !slices.Equal(listed, dirs) {
		t.Errorf("the Makefile's MODULES are %q; the go.mod files are in %q", listed, dirs)
	}
}

// No non-test file imports an internal package of another module: a
// released module would then build only with the other module's version it
// was released with, since internal packages promise nothing between
// versions. (The go command allows it within one module path prefix.)
// Tests may: they run in this repository, on its workspace.
func TestNoImportOfAnotherModulesInternal(t *testing.T) {
	mods := modules(t)
	owner := func(importPath string) *module { // the module with the longest path that holds importPath
		var best *module
		for i, m := range mods {
			if (importPath == m.path || strings.HasPrefix(importPath, m.path+"/")) && (best == nil || len(m.path) > len(best.path)) {
				best = &mods[i]
			}
		}
		return best
	}
	files := 0
	for _, m := range mods {
		err := filepath.WalkDir(filepath.Join(root, m.dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path == filepath.Join(root, m.dir) {
					return nil
				}
				if skipDir(d.Name()) {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, spec := range f.Imports {
				p, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					return err
				}
				if !slices.Contains(strings.Split(p, "/"), "internal") {
					continue
				}
				if o := owner(p); o != nil && o.dir != m.dir {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s (module %s) imports %s, an internal package of module %s", filepath.ToSlash(rel), m.path, p, o.path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 30 {
		t.Errorf("only %d non-test Go files read: the walk missed the modules", files)
	}
}

// The bench's copy of internal/redisserver (see the Makefile's generate) is
// the original, so that the tests and the bench start servers one way.
func TestBenchRedisServerIsTheOriginal(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(root, "internal/redisserver/redisserver.go"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(root, "bench/internal/redisserver/redisserver.go"))
	if err != nil {
		t.Fatal(err)
	}
	header := []byte("// Code generated by make generate from internal/redisserver/redisserver.go. DO NOT EDIT.\n\n")
	if !bytes.Equal(cp, append(header, orig...)) {
		t.Error("bench/internal/redisserver/redisserver.go is not internal/redisserver/redisserver.go: run make generate")
	}
}

// The published modules declare the Go release the Makefile's GO_FLOOR
// names, the one make floor (and so CI) tests them on: a go directive
// above it would refuse users that release for nothing, one below it
// would promise a release no test ran on.
func TestGoDirectiveIsTheTestedFloor(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`(?m)^GO_FLOOR\s*:?=\s*(\S+)\s*$`).FindSubmatch(makefile)
	if match == nil {
		t.Fatal("the Makefile has no GO_FLOOR := line")
	}
	floor := string(match[1])
	for _, dir := range []string{".", "grpclimit", "otelrate"} {
		got := directives(t, filepath.Join(root, dir, "go.mod"))["go"]
		if len(got) != 1 || got[0] != floor {
			t.Errorf("%s/go.mod: go %q; want go %s, the Makefile's GO_FLOOR (make floor tests on it)", dir, got, floor)
		}
		if tc := directives(t, filepath.Join(root, dir, "go.mod"))["toolchain"]; len(tc) > 0 {
			t.Errorf("%s/go.mod: toolchain %q: a published module names no toolchain", dir, tc)
		}
	}
}
