// Package assemble builds the files a user copies from their sources in
// scripts/src: each standalone script, the Functions library, the reset
// script, and the Go manifest that the client and the tests read. The shared
// sections (argument parsing, state, verdict, reply) are written once in
// scripts/src and copied into each output, so every output stands alone.
//
// Each algorithm's source opens with "--! key: value" lines, its manifest:
// everything about the algorithm that anything else needs, written once.
// "--@include file.lua" copies a shared section; "--@if flag", "--@else" and
// "--@end" keep the lines that fit the algorithm's flags (window, range;
// library in helpers.lua; general and fast, below), so no output carries a branch for
// another algorithm, and an unknown flag fails the generator; "--@body"
// separates what runs once (top-level definitions) from what runs per call.
// The lines between "--@fast begin" and "--@fast end" are also written as
// the copy specialized for one key and one limit (manifest "fast: true"),
// with the flag fast set and general unset: the source says there, with
// "--@if general" and "--@if fast", what the copy leaves out (the loop
// over limits, the binding limit's choice, the modes it hands to the
// general code) and what it has instead ("@TAG@" is the state's tag).
// In the state section, a line ending in "--@each field" is written once per
// field of the algorithm's state (fields.lua), so that the first limit's
// state is read into locals whatever the number of fields.
//
// The Lua the generator writes around the sources' code (each script's
// header and constants, the per-field checks, the macros "@name(arg)@",
// the tables of every algorithm) is in scripts/src's template files too
// (templates.go); this package holds only how the pieces are put together,
// by stage: reading the sources (source.go), the specialized copy
// (fastcopy.go), the fields (fields.go) and macros (macros.go), each script
// (script.go), the library (library.go), the reset script (reset.go) and
// the Go files (gofiles.go).
package assemble

import (
	"fmt"
	"io/fs"
	"strings"
)

// ContractVersion is the version of CONTRACT.md the scripts implement.
const ContractVersion = "4"

// LibraryName is the name of the Functions library.
const LibraryName = "redisrate"

// GeneralLibrary names the library GeneralOnly writes.
const GeneralLibrary = "redisrate_general"

// Files is every generated file, by path relative to scripts/. Two are not
// inside scripts/: "../algorithm_gen.go", the root package's Algorithm
// constants (GCRA, TokenBucket, ...), and storageFile, the scripts' state
// formats and argument rules, which the root package reads but package
// scripts does not export (a package under scripts/internal is not
// importable by the root package). They are facts of the manifests in
// scripts/src, written once there; made in the same run as the scripts,
// they cannot name an algorithm the scripts lack, number one otherwise or
// describe another state, and TestGeneratedFilesAreCurrent fails when
// either is stale. The root package cannot run this generator itself (it
// imports package scripts, which a generator of its own would have to read
// the manifests from).
type Files map[string][]byte

// Generate reads scripts/src (as src) and returns every generated file.
func Generate(src fs.FS) (Files, error) {
	g, algos, err := load(src)
	if err != nil {
		return nil, err
	}
	files, err := g.generate(algos, LibraryName)
	if err != nil {
		return nil, err
	}
	// Every definition is used by the whole output (GeneralOnly's, without
	// the specialized copies, leaves theirs unused).
	for _, t := range []*templates{g.header, g.constants, g.fields, g.macros, g.tables} {
		if err := t.unused(); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// GeneralOnly is the scripts and the library as Generate writes them, but
// without the copies specialized for one key and one limit, and with the
// library named GeneralLibrary (its functions GeneralLibrary_<algorithm>)
// so that it loads beside the real one: what the tests hold the
// specialized copies to, call by call.
func GeneralOnly(src fs.FS) (Files, error) {
	g, algos, err := load(src)
	if err != nil {
		return nil, err
	}
	for i := range algos {
		algos[i].Fast = nil
	}
	files, err := g.generate(algos, GeneralLibrary)
	if err != nil {
		return nil, err
	}
	for _, path := range goFiles {
		delete(files, path)
	}
	return files, nil
}

// generator is what every output is assembled from besides the
// algorithms: the template files, and the string functions and helpers
// that open each script and the library.
type generator struct {
	src                                       fs.FS
	header, constants, fields, macros, tables *templates
	stringFns                                 string // strings.lua
	scriptHelpers, libraryHelpers             string // helpers.lua, for each
}

// load reads scripts/src: the template files, the shared text, then each
// algorithm (source.go).
func load(src fs.FS) (*generator, []Algorithm, error) {
	g, err := newGenerator(src)
	if err != nil {
		return nil, nil, err
	}
	algos, err := g.algorithms()
	if err != nil {
		return nil, nil, err
	}
	return g, algos, g.err()
}

func newGenerator(src fs.FS) (*generator, error) {
	g := &generator{src: src}
	var err error
	for _, f := range []struct {
		name string
		t    **templates
	}{{"header.lua", &g.header}, {"constants.lua", &g.constants}, {"fields.lua", &g.fields},
		{"macros.lua", &g.macros}, {"tables.lua", &g.tables}} {
		if *f.t, err = readTemplates(src, f.name); err != nil {
			return nil, err
		}
	}
	text, err := fs.ReadFile(src, "strings.lua")
	if err != nil {
		return nil, err
	}
	g.stringFns = strings.TrimRight(string(text), "\n")
	if g.scriptHelpers, err = g.helpers(false); err != nil {
		return nil, err
	}
	g.libraryHelpers, err = g.helpers(true)
	return g, err
}

// helpers is helpers.lua for a script or the library, trailing newlines
// dropped. Numbers read there are read as a script reads them: the
// library's read() is what fills NUM.
func (g *generator) helpers(library bool) (string, error) {
	lines, err := g.expandFile("helpers.lua", map[string]bool{"library": library})
	if err != nil {
		return "", fmt.Errorf("helpers.lua: %w", err)
	}
	return strings.Join(g.expandMacros(lines, script, nil), "\n"), nil
}

// err is the first fault any template file found as it was read from.
func (g *generator) err() error {
	for _, t := range []*templates{g.header, g.constants, g.fields, g.macros, g.tables} {
		if t.err != nil {
			return t.err
		}
	}
	return nil
}

func (g *generator) generate(algos []Algorithm, libName string) (Files, error) {
	g.fillOthers(algos)
	out := Files{}
	for _, a := range algos {
		out[a.Name+".lua"] = g.script(a)
	}
	lib, err := g.library(algos, libName)
	if err != nil {
		return nil, err
	}
	out["library.lua"] = lib
	if out["reset.lua"], err = g.reset(algos); err != nil {
		return nil, err
	}
	if err := g.err(); err != nil {
		return nil, err
	}
	for name, text := range out {
		if loc := macro.FindIndex(text); loc != nil {
			return nil, fmt.Errorf("%s: a macro the generator did not write out (only in a script's body, the specialized copy and helpers.lua): %.40q", name, text[loc[0]:])
		}
		if loc := placeholder.FindIndex(text); loc != nil {
			return nil, fmt.Errorf("%s: a placeholder the generator did not fill (a misspelled @NAME@ in a template?): %.40q", name, text[loc[0]:])
		}
	}
	return out, addGoFiles(algos, out)
}

// fillOthers writes the table of every script's tag into the state
// section (@OTHERS@), for the error that names another script's state.
func (g *generator) fillOthers(algos []Algorithm) {
	others := g.eachState(algos, g.tables.get("other", ""), g.values)
	for i := range algos {
		for j, l := range algos[i].Body {
			algos[i].Body[j] = strings.ReplaceAll(l, "@OTHERS@", others)
		}
	}
}

// eachState is entry written for each algorithm with a string state (not
// the log) by values, the entries joined by commas.
func (g *generator) eachState(algos []Algorithm, entry string, values func(Algorithm) *strings.Replacer) string {
	var out []string
	for _, a := range algos {
		if !a.Log {
			out = append(out, values(a).Replace(entry))
		}
	}
	return strings.Join(out, ", ")
}

func writeLines(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
}
