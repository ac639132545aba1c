package scripts_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/redisrate/redisrate/scripts"
	"github.com/redisrate/redisrate/scripts/internal/assemble"
)

// The generated files must be what scripts/src generates today: a hand edit
// of a generated script, or a source change without `go generate`, fails here.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := assemble.Generate(os.DirFS("src"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"../algorithm_gen.go", "../internal/manifest/manifest_gen.go", "library.lua", "manifest_gen.go", "reset.lua"}
	for _, s := range scripts.Specs() {
		want = append(want, s.Name+".lua")
	}
	var made []string
	for path := range files {
		made = append(made, path)
	}
	sort.Strings(want)
	sort.Strings(made)
	if strings.Join(made, " ") != strings.Join(want, " ") {
		t.Fatalf("the generator made %v, want %v: the scripts, the library, reset.lua and three Go files", made, want)
	}
	// Every .lua file here is embedded and shipped: each must be one the
	// generator writes, not one left behind by a source since removed.
	lua, err := filepath.Glob("*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range lua {
		if files[path] == nil {
			t.Errorf("%s is not generated from scripts/src: remove it, or add its source", path)
		}
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Fatalf("%s: %v (run go generate ./scripts)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `cd scripts && go generate .`", path)
		}
	}
}

func TestSpecsMatchTheirFiles(t *testing.T) {
	specs := scripts.Specs()
	want := []string{"gcra", "token_bucket", "leaky_bucket", "sliding_window", "fixed_window", "sliding_log"}
	if len(specs) != len(want) {
		t.Fatalf("%d specs, want %d", len(specs), len(want))
	}
	for i, s := range specs {
		if s.Name != want[i] {
			t.Errorf("spec %d is %q, want %q (the contract's order)", i, s.Name, want[i])
		}
		file, err := os.ReadFile(s.Name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		if s.Source != string(file) {
			t.Errorf("%s: Source differs from %s.lua", s.Name, s.Name)
		}
		sum := sha1.Sum(file)
		if s.SHA1 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: SHA1 %s is not the file's", s.Name, s.SHA1)
		}
		if s.Function != "redisrate_"+s.Name {
			t.Errorf("%s: Function %q", s.Name, s.Function)
		}
		if !strings.Contains(scripts.Library, "'"+s.Function+"'") || !strings.Contains(scripts.Library, "'"+s.Function+"_ro'") {
			t.Errorf("the library does not register %s and %s_ro", s.Function, s.Function)
		}
		if got, ok := scripts.Lookup(s.Name); !ok || got.SHA1 != s.SHA1 {
			t.Errorf("Lookup(%q) = %v, %v", s.Name, got.Name, ok)
		}
	}
	if _, ok := scripts.Lookup("nope"); ok {
		t.Error("Lookup found a script that does not exist")
	}
	sum := sha1.Sum([]byte(scripts.ResetSource))
	if scripts.ResetSHA1 != hex.EncodeToString(sum[:]) {
		t.Error("ResetSHA1 is not reset.lua's")
	}
	if scripts.LibraryVersion == "" || !strings.Contains(scripts.Library, scripts.LibraryVersion) {
		t.Error("LibraryVersion is not in the library")
	}
}

// Each copied file states its algorithm once and reads as the contract's
// "Each file" section says: no other algorithm's tag, no generator markers,
// the header first.
func TestEachScriptStandsAlone(t *testing.T) {
	for _, s := range scripts.Specs() {
		src := s.Source
		if !strings.HasPrefix(src, "-- redisrate "+s.Name+".lua: ") {
			t.Errorf("%s: the header does not come first", s.Name)
		}
		for _, marker := range []string{"--@", "--!", "@OTHERS@"} {
			if strings.Contains(src, marker) {
				t.Errorf("%s: generator marker %q left in the output", s.Name, marker)
			}
		}
		// the sections, each once, in the contract's order
		at := 0
		for _, section := range []string{"-- ---- Arguments", "-- ---- The clock", "-- ---- State", "-- ---- Decision", "write", "-- ---- The reply"} {
			if section == "write" {
				section = "-- ---- The one write"
			}
			if strings.Count(src, section) != 1 {
				t.Errorf("%s: section %q appears %d times, want once", s.Name, section, strings.Count(src, section))
				continue
			}
			i := strings.Index(src, section)
			if i < at {
				t.Errorf("%s: section %q is out of order", s.Name, section)
			}
			at = i
		}
		for _, o := range scripts.Specs() {
			if o.Name != s.Name && strings.Contains(src, "local NAME, TAG = '"+o.Name) {
				t.Errorf("%s carries %s's constants", s.Name, o.Name)
			}
		}
		if strings.Contains(src, "#!lua") {
			t.Errorf("%s: a shebang would stop it running on Redis 6.2", s.Name)
		}
		// The specialized copy of the common call is generated and marked;
		// the general code is what a reader takes in.
		general := src
		if i := strings.Index(src, "-- ---- The common call: one key, one limit"); i >= 0 {
			j := strings.Index(src[i:], "\nuntil true\n")
			if j < 0 || !strings.Contains(src[i:i+j], "GENERATED COPY") {
				t.Errorf("%s: the specialized copy is not marked and closed", s.Name)
				continue
			}
			general = src[:i] + src[i+j:]
		}
		// 360 lines until v2.1's several keys added some 50 (their
		// arguments, each key's state read, written and named in errors),
		// and v3's modes some 60 more (upto's passes, refund and force in
		// each algorithm), and v4's exact arithmetic past 2^53 some 170
		// (exact.lua, deep.lua; the v2 states it no longer reads took 40).
		if n := strings.Count(general, "\n"); n > 690 {
			t.Errorf("%s: %d lines besides its specialized copy; a Lua reader should take it in at one sitting", s.Name, n)
		}
	}
	// The library holds the same copies, each marked: one per script that has one.
	copies, marked := strings.Count(scripts.Library, "-- ---- The common call: one key, one limit"), strings.Count(scripts.Library, "GENERATED COPY")
	if copies != 5 || marked != copies {
		t.Errorf("the library holds %d specialized copies, %d of them marked GENERATED COPY; want the 5 of the scripts, each marked", copies, marked)
	}
}
