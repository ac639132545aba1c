package assemble

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// placeholder finds a @NAME@ that src/library.lua left unfilled.
var placeholder = regexp.MustCompile(`@[A-Za-z_]+@`)

// library is the Functions library, named name, from src/library.lua: the
// string functions and helpers and each algorithm's top-level definitions
// once, at FUNCTION LOAD; each algorithm's per-call code as a function.
func (g *generator) library(algos []Algorithm, name string) ([]byte, error) {
	text, err := fs.ReadFile(g.src, "library.lua")
	if err != nil {
		return nil, err
	}
	head, rest, ok1 := strings.Cut(string(text), "--@helpers\n")
	between, each, rest, ok2 := marked(rest, "--@algorithm", "--@end algorithm\n")
	closing, register, last, ok3 := marked(rest, "--@register", "--@end register\n")
	if !(ok1 && ok2 && ok3) || between != "" {
		return nil, fmt.Errorf("library.lua: want the sections --@helpers, --@algorithm ... --@end algorithm, --@register ... --@end register")
	}
	var b strings.Builder
	b.WriteString(strings.NewReplacer("@LIBRARY@", name, "@CONTRACT@", ContractVersion, "@ALGORITHMS@", names(algos)).Replace(head))
	b.WriteString(g.stringFns + "\n\n" + g.libraryHelpers + "\n\n")
	for _, a := range algos {
		g.writeFunction(&b, a, each)
	}
	b.WriteString(closing)
	writeRegistrations(&b, algos, name, register, last)
	if m := placeholder.FindString(b.String()); m != "" {
		return nil, fmt.Errorf("library.lua: a placeholder the generator does not fill: %s", m)
	}
	return []byte(b.String()), nil
}

// writeRegistrations writes register for each algorithm, then last. The
// version is the SHA1 of the code so far (b): each function is registered
// under its contract name and under a name bound to this version
// (VersionedName), which a client that bundles this library calls, so that
// it never runs another version.
func writeRegistrations(b *strings.Builder, algos []Algorithm, name, register, last string) {
	version := sha(b.String())
	for _, a := range algos {
		fn := name + "_" + a.Name
		b.WriteString(strings.NewReplacer("@name@", a.Name, "@function@", fn, "@function_v@", VersionedName(fn, version),
			"@function_ro_v@", VersionedName(fn+"_ro", version)).Replace(register))
	}
	b.WriteString(strings.NewReplacer("@LIBRARY@", name, "@LIBRARY_VERSION@", version).Replace(last))
}

// marked cuts text at a section: what comes before the line that begins
// with begin, the lines after it up to end, and what follows end.
func marked(text, begin, end string) (before, inside, after string, ok bool) {
	before, rest, ok1 := strings.Cut(text, begin)
	_, rest, ok2 := strings.Cut(rest, "\n") // the rest of the marker's line
	inside, after, ok3 := strings.Cut(rest, end)
	return before, inside, after, ok1 && ok2 && ok3
}

// writeFunction writes library.lua's section for each algorithm (each)
// for a: "--@constants", "--@top" and "--@body" are a's constants,
// top-level code and per-call code (the specialized copy, then the general
// code, indented); "@name@" is a's name.
func (g *generator) writeFunction(b *strings.Builder, a Algorithm, each string) {
	for _, line := range strings.SplitAfter(each, "\n") {
		switch strings.TrimSpace(line) {
		case "--@constants":
			g.writeConstants(b, a, true)
		case "--@top":
			writeLines(b, a.Top)
		case "--@body":
			code := append(scriptOnly(a.Fast, false), a.Body...)
			for _, l := range g.expandMacros(code, library, g.values(a)) {
				if l != "" {
					b.WriteString("  ")
				}
				b.WriteString(l + "\n")
			}
		default:
			b.WriteString(strings.ReplaceAll(line, "@name@", a.Name))
		}
	}
}

func names(algos []Algorithm) string {
	var s []string
	for _, a := range algos {
		s = append(s, a.Name)
	}
	return strings.Join(s, ", ")
}

func sha(text string) string {
	sum := sha1.Sum([]byte(text))
	return hex.EncodeToString(sum[:])
}

// VersionedName is function's name bound to the library version version:
// the name, "_v" and the version's first 12 hex digits (48 bits), e.g.
// redisrate_gcra_v73cf21b0d14e. Another version of the library, loaded in
// its place by FUNCTION LOAD REPLACE, has the same contract names but not
// these, so a call by this name runs this version or fails with "Function
// not found".
func VersionedName(function, version string) string {
	return function + "_v" + version[:12]
}

// libraryVersion finds the version in the library's source: what its
// redisrate_version function returns.
var libraryVersion = regexp.MustCompile(`callback = function\(\) return '([0-9a-f]{40})' end`)

// LibraryVersion returns the version string the library's redisrate_version
// function returns, read back from the library's source.
func LibraryVersion(lib string) string {
	m := libraryVersion.FindStringSubmatch(lib)
	if m == nil {
		return ""
	}
	return m[1]
}
