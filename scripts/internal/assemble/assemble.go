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
// field of the algorithm's state (see perField), so that the first limit's
// state is read into locals whatever the number of fields.
package assemble

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"go/format"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ContractVersion is the version of CONTRACT.md the scripts implement.
const ContractVersion = "4"

// latestTime is 2250-01-01 in seconds since the epoch: the latest time a
// state may hold. The contract's horizon is 2200 (guarantee 6); the margin
// takes clocks a little past it, while a TTL from a state's time (at most
// 224 years from now, plus a period) stays within what every server's
// timers hold.
const latestTime = 8835955200

// aheadMax is the latest time ahead of the clock a state may hold (gcra's
// TAT): the latest recorded time, 2250, plus the longest a TAT runs ahead
// (a capacity of 2^52 in units of 1/a microsecond), rounded up to 2 mod 4.
// Past 2^53 a double holds only even numbers, and 17 digits that read as at
// most this value then stand for at most it: the next number, odd, rounds
// to the even one above (ties to a multiple of 4).
const aheadMax = latestTime*1000000 + 1<<52 + 2

// LibraryName is the name of the Functions library.
const LibraryName = "redisrate"

// Algorithm is one script's manifest and its sections.
type Algorithm struct {
	ID       int
	Go       string // the Go constant's name, e.g. TokenBucket
	Name     string // the file name without .lua
	Tag      string // the state's tag; for a log, its marker member
	Signed   int    // which of a limit's fields may be negative (1-based; 0: none)
	Positive int    // which of a limit's fields is never 0 in a state of one limit the scripts wrote (1-based; 0: none)
	Fields   int    // numbers per limit in the state string
	TimeAt   int    // which of a limit's fields is a recorded time (1-based; 0: none, or the log's entries)
	BigAt    int    // which of a limit's fields is a level of up to 26 digits (gcra's and leaky_bucket's level times period_us, past 2^53 in v4's range); 0: none
	TimeMax  int64  // the latest time a state may hold: the year 2250, in its unit
	Window   bool
	Log      bool
	Range    string
	MaxLimit int64
	Summary  string
	About    []string // the algorithm's comment lines, for the header
	Top      []string // code run once, before --@body
	Body     []string // code run per call
	Fast     []string // the copy of Body specialized for one key and one limit (manifest "fast: true"), or nil
}

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

// storageFile is the generated part of the module's internal/manifest.
const storageFile = "../internal/manifest/manifest_gen.go"

var (
	metaLine    = regexp.MustCompile(`^--! ([a-z_]+):\s*(.*)$`)
	includeLine = regexp.MustCompile(`^--@include ([a-z_]+\.lua)$`)
)

// Generate reads scripts/src (as src) and returns every generated file.
func Generate(src fs.FS) (Files, error) {
	algos, err := load(src)
	if err != nil {
		return nil, err
	}
	return generate(src, algos, LibraryName)
}

// GeneralOnly is the scripts and the library as Generate writes them, but
// without the copies specialized for one key and one limit, and with the
// library named GeneralLibrary (its functions GeneralLibrary_<algorithm>)
// so that it loads beside the real one: what the tests hold the
// specialized copies to, call by call.
func GeneralOnly(src fs.FS) (Files, error) {
	algos, err := load(src)
	if err != nil {
		return nil, err
	}
	for i := range algos {
		algos[i].Fast = nil
	}
	files, err := generate(src, algos, GeneralLibrary)
	if err != nil {
		return nil, err
	}
	delete(files, "manifest_gen.go")
	delete(files, "../algorithm_gen.go")
	delete(files, storageFile)
	return files, nil
}

// GeneralLibrary names the library GeneralOnly writes.
const GeneralLibrary = "redisrate_general"

func generate(src fs.FS, algos []Algorithm, libName string) (Files, error) {
	// Every script's tag, for the error that names another script's state;
	// a table built only on that error's path.
	var others []string
	for _, o := range algos {
		if !o.Log {
			others = append(others, fmt.Sprintf("['%s'] = '%s'", o.Tag, o.Name))
		}
	}
	for i := range algos {
		for j, l := range algos[i].Body {
			algos[i].Body[j] = strings.ReplaceAll(l, "@OTHERS@", "{ "+strings.Join(others, ", ")+" }")
		}
	}
	stringFns, err := fs.ReadFile(src, "strings.lua")
	if err != nil {
		return nil, err
	}
	helpers, err := fs.ReadFile(src, "helpers.lua")
	if err != nil {
		return nil, err
	}
	scriptHelpers, err := expandText(src, helpers, map[string]bool{"library": false})
	if err != nil {
		return nil, fmt.Errorf("helpers.lua: %w", err)
	}
	libraryHelpers, err := expandText(src, helpers, map[string]bool{"library": true})
	if err != nil {
		return nil, fmt.Errorf("helpers.lua: %w", err)
	}
	out := Files{}
	for _, a := range algos {
		// The string functions and the constants, then the common call's
		// specialized copy, which returns before the helpers below make
		// their closures (some 500 instructions each, on every call).
		var b strings.Builder
		header(&b, a)
		b.WriteString(strings.TrimRight(string(stringFns), "\n") + "\n\n")
		writeLines(&b, scriptReads(scriptOnly(a.Fast, true)))
		constants(&b, a, false)
		b.WriteString(scriptHelpers + "\n\n")
		writeLines(&b, a.Top)
		writeLines(&b, scriptReads(replaceAll(a.Body, fullMacro, fullPattern(a, "$1"))))
		out[a.Name+".lua"] = []byte(b.String())
	}
	lib, err := library(src, algos, strings.TrimRight(string(stringFns), "\n")+"\n\n"+libraryHelpers, libName)
	if err != nil {
		return nil, err
	}
	out["library.lua"] = []byte(lib)
	resetLua, err := reset(src, algos)
	if err != nil {
		return nil, err
	}
	out["reset.lua"] = []byte(resetLua)
	for name, text := range out {
		if loc := unwritten.FindIndex(text); loc != nil {
			return nil, fmt.Errorf("%s: a number read the generator did not write out (only @read(name)@ in a script's body, @fastread(name)@ in fast.lua): %.40q", name, text[loc[0]:])
		}
	}
	goSrc, err := manifest(algos, out)
	if err != nil {
		return nil, err
	}
	out["manifest_gen.go"] = goSrc
	rootSrc, err := algorithmConstants(algos)
	if err != nil {
		return nil, err
	}
	out["../algorithm_gen.go"] = rootSrc
	storageSrc, err := storage(algos)
	if err != nil {
		return nil, err
	}
	out[storageFile] = storageSrc
	return out, nil
}

// scriptOnly is lines without the "--@scriptonly begin" and "--@scriptonly
// end" markers: keeping what is between them (a script, keep) or not (the
// library, which defines those functions once, at load).
func scriptOnly(lines []string, keep bool) []string {
	var out []string
	in := false
	for _, l := range lines {
		switch strings.TrimSpace(l) {
		case "--@scriptonly begin":
			in = true
			continue
		case "--@scriptonly end":
			in = false
			continue
		}
		if !in || keep {
			out = append(out, l)
		}
	}
	return out
}

// readMacro is how the sources read a number argument, "@read(s)@"; the
// generator writes out how: a script reads the string (helpers.lua,
// "Numbers"), the library first looks it up in what earlier calls read.
var readMacro = regexp.MustCompile(`@read\((\w+)\)@`)

// placeholder finds a @NAME@ that src/library.lua left unfilled.
var placeholder = regexp.MustCompile(`@[A-Za-z_]+@`)

// unwritten finds a read macro the generator left in an output.
var unwritten = regexp.MustCompile(`@((fast)?read|(fast|read)period|clock|FULL)\(`)

// fastMacro is how the specialized copy reads a number, "@fastread(s)@": a
// script only the plain form (any other falls to the general code, which
// reads it or names it in its error), the library as its general code does.
var fastMacro = regexp.MustCompile(`@fastread\((\w+)\)@`)

// periodMacro is how the specialized copy reads period_ms,
// "@fastperiod(s)@": a script first compares it with the periods of a
// second, a minute, an hour and a day, which nearly every limit has (the Go
// client's PerSecond to PerDay, and what other clients write for them): a
// comparison of interned strings costs some 40 instructions where find and
// a conversion cost 1,700, and the number is the same. Any other period is
// read as @fastread reads it; the library reads through NUM as ever. The
// general code reads a period so too, "@readperiod(s)@".
var periodMacro = regexp.MustCompile(`@fastperiod\((\w+)\)@`)

// readPeriodMacro is the general code's read of period_ms (periodMacro).
var readPeriodMacro = regexp.MustCompile(`@readperiod\((\w+)\)@`)

const (
	scriptRead       = "#$1 < 16 and find($1, '^[1-9]%d*$') and $1 + 0 or whole($1)" // (the length first: a string of 1 MB is not scanned twice)
	libraryRead      = "NUM[$1] or read($1)"
	scriptFastRead   = "#$1 < 16 and find($1, '^[1-9]%d*$') and $1 + 0"
	scriptPeriod     = "$1 == '1000' and 1000 or $1 == '60000' and 60000 or $1 == '3600000' and 3600000 or $1 == '86400000' and 86400000 or " + scriptFastRead
	scriptReadPeriod = "$1 == '1000' and 1000 or $1 == '60000' and 60000 or $1 == '3600000' and 3600000 or $1 == '86400000' and 86400000 or " + scriptRead
)

// fullMacro is the pattern of a state of n limits, "@FULL(n)@": built by
// a script when it needs one, made once by the library (constants).
var fullMacro = regexp.MustCompile(`@FULL\((\w+)\)@`)

// fullPattern is the pattern of a's state of n limits (n a Lua
// expression): the tag, then each limit's numbers (limitPattern).
func fullPattern(a Algorithm, n string) string {
	return "'^' .. TAG .. ('').rep('" + limitPattern(a) + "', " + n + ") .. '$'"
}

// limitPattern is the pattern of one limit's numbers in a's state, each
// captured: a recorded time, or a field never 0 in a state of one limit
// (Positive), without a leading zero, so that it needs no check of its own
// (a power of 10); a state it does not match (a 0 there, which a state of
// several limits may hold) is read field by field and checked whole.
func limitPattern(a Algorithm) string {
	var b strings.Builder
	for k := 1; k <= a.Fields; k++ {
		switch {
		case k == a.TimeAt || k == a.Positive:
			b.WriteString(" ([1-9]%d*)")
		case k == a.Signed:
			b.WriteString(" (%-?%d+)")
		default:
			b.WriteString(" (%d+)")
		}
	}
	return b.String()
}

// replaceAll is lines with macro replaced by repl, in a new slice (the
// script and the library write out the same lines each their way).
func replaceAll(lines []string, macro *regexp.Regexp, repl string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = macro.ReplaceAllString(l, repl)
	}
	return out
}

// scriptReads writes out every read macro of lines as a script reads.
func scriptReads(lines []string) []string {
	lines = readNumbers(lines, scriptPeriod, periodMacro)
	lines = readNumbers(lines, scriptReadPeriod, readPeriodMacro)
	lines = readNumbers(lines, scriptFastRead, fastMacro)
	return readNumbers(lines, scriptRead, readMacro)
}

// libraryReads writes out every read macro of lines as the library reads:
// each number through NUM.
func libraryReads(lines []string) []string {
	for _, m := range []*regexp.Regexp{periodMacro, readPeriodMacro, fastMacro, readMacro} {
		lines = readNumbers(lines, libraryRead, m)
	}
	return lines
}

// readNumbers writes out the read macro (macro) as read, and the clock's
// seconds, "@clock(s)@", as the library reads a number and a script reads
// the digits of TIME: in the library NUM keeps what each string read as,
// and the seconds of TIME change once a second (some 400 instructions saved
// per call); a script, which keeps nothing from one call to the next,
// converts them as it multiplies.
func readNumbers(lines []string, read string, macro *regexp.Regexp) []string {
	clock := "$1"
	if read == libraryRead {
		clock = "(" + libraryRead + ")"
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = clockMacro.ReplaceAllString(macro.ReplaceAllString(l, read), clock)
	}
	return out
}

// clockMacro is the seconds of TIME, read: "@clock(s)@".
var clockMacro = regexp.MustCompile(`@clock\((\w+)\)@`)

// expandText is expand for the helpers' text, trailing newlines dropped.
// Numbers read there are read as a script reads them: the library's read()
// is what fills NUM.
func expandText(src fs.FS, text []byte, flags map[string]bool) (string, error) {
	lines, err := expand(src, strings.Split(strings.TrimRight(string(text), "\n"), "\n"), flags)
	return strings.Join(readNumbers(lines, scriptRead, readMacro), "\n"), err
}

func writeLines(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
}

func load(src fs.FS) ([]Algorithm, error) {
	names, err := fs.Glob(src, "*.lua")
	if err != nil {
		return nil, err
	}
	var algos []Algorithm
	for _, file := range names {
		text, err := fs.ReadFile(src, file)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(text, []byte("--! ")) {
			continue // a shared section
		}
		a, err := parse(src, file, text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		algos = append(algos, a)
	}
	sort.Slice(algos, func(i, j int) bool { return algos[i].ID < algos[j].ID })
	for i, a := range algos {
		if a.ID != i {
			return nil, fmt.Errorf("%s.lua: id %d, want %d (ids run from 0 without gaps)", a.Name, a.ID, i)
		}
	}
	return algos, nil
}

func parse(src fs.FS, file string, text []byte) (Algorithm, error) {
	a := Algorithm{}
	meta := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	inAbout, inBody := true, false
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		if m := metaLine.FindStringSubmatch(line); m != nil {
			meta[m[1]] = m[2]
			continue
		}
		if inAbout && strings.HasPrefix(line, "--") && !strings.HasPrefix(line, "--@") {
			a.About = append(a.About, line)
			continue
		}
		inAbout = false
		if line == "--@body" {
			a.Top, lines, inBody = lines, nil, true
			continue
		}
		lines = append(lines, line)
	}
	if !inBody {
		return a, fmt.Errorf("no --@body line")
	}
	var err error
	for _, key := range []string{"id", "go", "name", "tag", "fields", "time_field", "time_unit", "window", "range", "max_limit", "summary"} {
		if _, ok := meta[key]; !ok {
			return a, fmt.Errorf("manifest line --! %s: missing", key)
		}
	}
	a.Go, a.Name, a.Tag, a.Range, a.Summary = meta["go"], meta["name"], meta["tag"], meta["range"], meta["summary"]
	if a.ID, err = strconv.Atoi(meta["id"]); err != nil {
		return a, err
	}
	if a.Fields, err = strconv.Atoi(meta["fields"]); err != nil {
		return a, err
	}
	if a.MaxLimit, err = strconv.ParseInt(meta["max_limit"], 10, 64); err != nil {
		return a, err
	}
	if a.TimeAt, err = strconv.Atoi(meta["time_field"]); err != nil {
		return a, err
	}
	if v, ok := meta["signed_field"]; ok {
		if a.Signed, err = strconv.Atoi(v); err != nil || a.Signed < 1 || a.Signed > a.Fields || a.Signed == a.TimeAt {
			return a, fmt.Errorf("signed_field %q: want a field other than time_field", v)
		}
	}
	if v, ok := meta["positive_field"]; ok {
		if a.Positive, err = strconv.Atoi(v); err != nil || a.Positive < 1 || a.Positive > a.Fields || a.Positive == a.Signed {
			return a, fmt.Errorf("positive_field %q: want a field that is not signed", v)
		}
	}
	if v, ok := meta["big_field"]; ok {
		if a.BigAt, err = strconv.Atoi(v); err != nil || a.BigAt < 1 || a.BigAt > a.Fields || a.BigAt == a.TimeAt || a.BigAt != a.Positive {
			return a, fmt.Errorf("big_field %q: want the positive field, other than time_field", v)
		}
	}
	switch meta["time_unit"] {
	case "us":
		a.TimeMax = latestTime * 1000000
	case "ms":
		a.TimeMax = latestTime * 1000
	default:
		return a, fmt.Errorf("time_unit %q: want us or ms", meta["time_unit"])
	}
	a.Window, a.Log = meta["window"] == "true", meta["log"] == "true"
	if file != a.Name+".lua" {
		return a, fmt.Errorf("name %q does not match the file name", a.Name)
	}
	flags := map[string]bool{"window": a.Window, "log": a.Log, "range": a.Range != "", "general": true, "fast": false}
	if a.Top, err = expand(src, a.Top, flags); err != nil {
		return a, err
	}
	if a.Body, err = expand(src, lines, flags); err != nil {
		return a, err
	}
	region, general, err := fastRegion(a.Body)
	if err != nil {
		return a, err
	}
	a.Body = general
	if meta["fast"] == "true" {
		if region < 0 {
			return a, fmt.Errorf("fast: true, but no --@fast begin ... --@fast end")
		}
		flags["general"], flags["fast"] = false, true
		all, err := expand(src, lines, flags)
		if err != nil {
			return a, err
		}
		copied, _, err := fastRegion(all)
		if err != nil || copied < 0 {
			return a, fmt.Errorf("fast: the region is not whole with the flag fast set")
		}
		fast, err := expand(src, []string{"--@include fast.lua"}, flags)
		if err != nil {
			return a, err
		}
		fast = append(fast, regionLines(all)...)
		tail, err := expand(src, []string{"--@include fast_reply.lua"}, flags)
		if err != nil {
			return a, err
		}
		if a.Fast, err = inlineConstants(a, perField(a, append(fast, tail...), true)); err != nil {
			return a, fmt.Errorf("fast: %w", err)
		}
	}
	if !a.Log {
		a.Body = perField(a, a.Body, false)
	}
	return a, nil
}

// fastRegion finds the lines between "--@fast begin" and "--@fast end"
// in lines, expanded: it returns the index of the first (-1 when there are
// none) and lines without the two markers. A second region, or a begin
// without an end, fails, so that the specialized copy is never silently
// cut short.
func fastRegion(lines []string) (int, []string, error) {
	start, end := -1, -1
	var out []string
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case "--@fast begin":
			if start >= 0 {
				return -1, nil, fmt.Errorf("a second --@fast begin")
			}
			start = i
			continue
		case "--@fast end":
			if start < 0 || end >= 0 {
				return -1, nil, fmt.Errorf("--@fast end without --@fast begin")
			}
			end = i
			continue
		}
		out = append(out, l)
	}
	if start >= 0 && end < 0 {
		return -1, nil, fmt.Errorf("--@fast begin without --@fast end")
	}
	return start, out, nil
}

// regionLines is the lines between the markers of lines' fast region.
func regionLines(lines []string) []string {
	var out []string
	in := false
	for _, l := range lines {
		switch strings.TrimSpace(l) {
		case "--@fast begin":
			in = true
		case "--@fast end":
			return out
		default:
			if in {
				out = append(out, l)
			}
		}
	}
	return out
}

// expand resolves --@include lines (recursively) and --@if blocks.
func expand(src fs.FS, lines []string, flags map[string]bool) ([]string, error) {
	var out []string
	type block struct{ keep, parentKeep bool }
	var stack []block
	keep := true
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "--@if "):
			flag := strings.TrimPrefix(trimmed, "--@if ")
			v, ok := flags[flag]
			if !ok {
				return nil, fmt.Errorf("unknown flag %q", flag)
			}
			stack = append(stack, block{keep: v, parentKeep: keep})
			keep = keep && v
			continue
		case trimmed == "--@else":
			if len(stack) == 0 {
				return nil, fmt.Errorf("--@else without --@if")
			}
			top := &stack[len(stack)-1]
			top.keep = !top.keep
			keep = top.parentKeep && top.keep
			continue
		case trimmed == "--@end":
			if len(stack) == 0 {
				return nil, fmt.Errorf("--@end without --@if")
			}
			keep = stack[len(stack)-1].parentKeep
			stack = stack[:len(stack)-1]
			continue
		}
		if !keep {
			continue
		}
		if m := includeLine.FindStringSubmatch(trimmed); m != nil {
			inc, err := fs.ReadFile(src, m[1])
			if err != nil {
				return nil, err
			}
			sub, err := expand(src, strings.Split(strings.TrimRight(string(inc), "\n"), "\n"), flags)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m[1], err)
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, line)
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("--@if without --@end")
	}
	return out, nil
}

// constants declares what the shared sections read of the algorithm. The
// library also makes, once at load, the pattern of a state of each number
// of limits (FULL, read by "@FULL(n)@"), which a script builds when it
// needs one (some 1,800 instructions).
func constants(b *strings.Builder, a Algorithm, library bool) {
	fmt.Fprintf(b, "-- ---- %s's constants (from its manifest) ----\n", a.Name)
	fmt.Fprintf(b, "local NAME, TAG = '%s', '%s'\n", a.Name, a.Tag)
	fmt.Fprintf(b, "local MAX_LIMIT, LIMIT_RULE, BURST_RULE = %d, 'must be a whole number from 1 to %s', 'must be a whole number up to %s, or 0 or empty for limit'\n", a.MaxLimit, power(a.MaxLimit), power(a.MaxLimit))
	if a.Log {
		fmt.Fprintf(b, "local TIME_MAX = %d -- the latest entry: the year 2250, in microseconds\n", a.TimeMax)
	} else {
		fields := strings.Repeat(" (%d+)", a.Fields)
		if a.Signed > 0 {
			fields = strings.Repeat(" (%d+)", a.Signed-1) + " (%-?%d+)" + strings.Repeat(" (%d+)", a.Fields-a.Signed)
		}
		fmt.Fprintf(b, "local TIME_AT, TIME_MAX = %d, %d -- which of a limit's fields is a recorded time (0: none), and its range: up to the year 2250\n", a.TimeAt, a.TimeMax)
		fmt.Fprintf(b, "local FIELDS, STATE = %d, '^%s%s(.*)$' -- the numbers of one limit; the state: the first limit's, then the rest\n", a.Fields, a.Tag, fields)
		if library {
			b.WriteString("local FULL = {} -- FULL[n]: the state of n limits, as state.lua matches it\n")
			b.WriteString("for n = 1, 8 do FULL[n] = " + fullPattern(a, "n") + " end\n")
		}
	}
	b.WriteByte('\n')
}

// timeAt is the index, mod Fields, of a limit's recorded-time field, as the
// reset script compares it with n % per; -1 when the state records none.
func timeAt(a Algorithm) int {
	if a.TimeAt == 0 {
		return -1
	}
	return a.TimeAt % a.Fields
}

// inlineConstants writes the constants the specialized copy reads as
// their values: in a script the copy comes before the constants, so that
// the common call does not set them (some 500 instructions by EVALSHA),
// and its pattern for the state of one limit is written only there. A
// recorded time is never 0 in a state the scripts wrote: that pattern
// takes it without a leading zero and leaves a 0 to the general code, so
// that it needs no check of its own (a power of 10 per call).
// A constant the copy reads that is not written as its value would be an
// undefined global there: the generator fails instead.
func inlineConstants(a Algorithm, lines []string) ([]string, error) {
	values := map[string]string{
		"TAG":       "'" + a.Tag + "'",
		"MAX_LIMIT": strconv.FormatInt(a.MaxLimit, 10),
		"TIME_MAX":  strconv.FormatInt(a.TimeMax, 10),
		"AHEAD_MAX": strconv.FormatInt(aheadMax, 10),
		"STATE1":    "'^" + a.Tag + limitPattern(a) + "$'",
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		l = strings.ReplaceAll(l, "@TAG@", a.Tag)
		code, comment, _ := strings.Cut(l, "--")
		code = constantName.ReplaceAllStringFunc(code, func(name string) string { return values[name] })
		if name := otherConstant.FindString(code); name != "" {
			return nil, fmt.Errorf("the specialized copy reads the constant %s, which a script declares after it: write it as a value (inlineConstants)", name)
		}
		if comment != "" || strings.HasSuffix(l, "--") {
			code += "--" + comment
		}
		out[i] = code
	}
	return out, nil
}

// constantName finds, in the specialized copy's code, a constant it reads.
var constantName = regexp.MustCompile(`\b(TAG|MAX_LIMIT|TIME_MAX|AHEAD_MAX|STATE1)\b`)

// otherConstant finds the other constants a script declares (constants).
var otherConstant = regexp.MustCompile(`\b(NAME|LIMIT_RULE|BURST_RULE|TIME_AT|FIELDS|STATE|AHEAD_AT)\b`)

// perField expands the state section's per-field lines for a: "@stored@"
// and "@texts@" become the first limit's locals (s1, s2, ... and t1, t2,
// ...), and a line that ends in "--@each field" is written once for each
// field k, with "@k@" as k and "@max@" as the field's maximum (TIME_MAX for
// the recorded time, else 2^53 - 1), "@zero@" as the check that field k has
// no leading zero (and, for a signed field, a sign only before a digit
// other than 0), "@lead@" and "@leadf@" as that check where the pattern
// does not already make it. So a state of one limit is read into
// locals, without a table, in every algorithm whatever its number of fields.
func perField(a Algorithm, lines []string, fast bool) []string {
	var stored, texts []string
	for k := 1; k <= a.Fields; k++ {
		stored = append(stored, fmt.Sprintf("s%d", k))
		texts = append(texts, fmt.Sprintf("t%d", k))
	}
	var out []string
	for _, l := range lines {
		l = strings.ReplaceAll(l, "@stored@", strings.Join(stored, ", "))
		l = strings.ReplaceAll(l, "@texts@", strings.Join(texts, ", "))
		num := "%d+"
		if a.Signed > 0 {
			num = "%-?%d+"
		}
		l = strings.ReplaceAll(l, "@num@", num)
		line, each := strings.CutSuffix(l, " --@each field")
		if !each {
			out = append(out, l)
			continue
		}
		for k := 1; k <= a.Fields; k++ {
			max, digits, lead, leadf := "9007199254740991", "16", fmt.Sprintf("(#t%d == 1 or s%d >= 10 ^ (#t%d - 1)) and ", k, k, k), "(#f == 1 or v >= 10 ^ (#f - 1)) and "
			keep, keepv := "", "v"
			switch k {
			case a.TimeAt:
				max, lead, leadf = "TIME_MAX", "", ""
			case a.BigAt:
				// up to 26 digits, without a leading zero (the pattern's);
				// past 2^53 - 1 kept as its text, which deep.lua reads
				// exactly. The specialized copy takes none past 2^53 - 1.
				lead, leadf = "", ""
				if !fast {
					max, digits = "1e26", "26"
					keep = fmt.Sprintf("if good and s%d > 9007199254740991 then s%d = t%d end", k, k, k)
					keepv = "v > 9007199254740991 and f or v"
				}
			case a.Positive:
				// the patterns of one limit's state and of n limits' take no
				// leading zero there (limitPattern), nor does the rest's read
				// (state.lua: no " 0" followed by a digit)
				lead, leadf = "", ""
			case a.Signed:
				// "-5": no leading zero after the sign, no "-0", and at
				// least -(2^53 - 1)
				digits = "17"
				lead = fmt.Sprintf("(#t%d == 1 or s%d >= 10 ^ (#t%d - 1) or -s%d >= 10 ^ (#t%d - 2)) and -s%d <= 9007199254740991 and ", k, k, k, k, k, k)
				leadf = "(#f == 1 or v >= 10 ^ (#f - 1) or -v >= 10 ^ (#f - 2)) and -v <= 9007199254740991 and "
			}
			zero := fmt.Sprintf("(#t%d == 1 or s%d >= 10 ^ (#t%d - 1)) and ", k, k, k) // no leading zero, whatever the field
			if k == a.Signed {
				zero = lead
			}
			r := strings.NewReplacer("@lead@", lead, "@leadf@", leadf, "@zero@", zero, "@k@", strconv.Itoa(k), "@max@", max, "@digits@", digits, "@keepv@", keepv, "@keep@", keep)
			if l := r.Replace(line); strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

func power(v int64) string {
	s := strconv.FormatInt(v, 10)
	if len(s) > 5 && strings.Trim(s[1:], "0") == "" && s[0] == '1' {
		return "10^" + strconv.Itoa(len(s)-1)
	}
	return s
}

func header(b *strings.Builder, a Algorithm) {
	burst := "capacity: the most units available at once; 0 or absent means limit"
	capacity := "burst"
	if a.Window {
		burst = "absent, 0 or equal to limit (a window has no burst of its own)"
		capacity = "limit"
	}
	fmt.Fprintf(b, `-- redisrate %s.lua: %s.
-- Script contract v%s (CONTRACT.md in the redisrate repository). This file
-- stands alone: copy it, SCRIPT LOAD it, EVALSHA it from any Redis client.
--
-- Call:
--   EVALSHA <sha1> 1 <key> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--   EVALSHA <sha1> <k> <key1> ... <keyk> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--
-- KEYS: one key holds every limit's state. With k keys (2 to 8, all
-- different, in one cluster slot by a hash tag), limit i guards KEYS[i],
-- which keeps its limit's state as a one-key call with it would: a key many
-- calls share (an organisation's) can also be called alone with its limit.
--
-- ARGV (whole decimal numbers, digits only; "" means the default):
--   1 limit      units per period_ms, from 1 to %s
--   2 period_ms  the period in milliseconds, from 1 to 10^12
--   3 burst      %s
--   4 cost       units this request takes, default 1; 0 reads the state and takes nothing
--   5 mode       "" decides and records, all or nothing; "check" decides exactly so but
--                records nothing; "upto" takes as many units as every limit admits, at
--                most cost; "refund" gives cost units back; "force" records cost units
--                whatever the limits decide, as far as a debt of one capacity
--   6..          further "limit period_ms burst" triples, up to 8 limits in all:
--                admitted only if every limit admits, then recorded against each
--                (on every key); otherwise nothing is written (on any key)
--
-- Reply: seven integers (a client ignores any it does not know)
--   1 allowed         1 admitted, 0 denied
--   2 remaining       whole units left after this call (on a denial: now)
--   3 retry_after_ms  0 when allowed; else ms until the same request would be admitted; -1 never
--   4 reset_after_ms  ms until the key is back to full capacity
--   5 capacity        the binding limit's capacity (%s)
--   6 binding         which limit (1, 2, ...) fields 2 to 5 describe; with k keys, KEYS[binding]'s
--   7 units           units this call recorded on the binding limit (given back, for refund)
-- For upto, a grant of 0 is a denial whose retry_after_ms is the wait for one
-- unit. refund and force describe the key after the call: retry_after_ms is
-- the wait until one unit would be admitted; force is allowed (1) when the
-- empty mode would have admitted it.
--
-- Errors: "ERR invalid <argument> '<value>': <rule>", naming the first fault in
-- this order: numkeys not 1 to 8, a key the same as an earlier one ("key #i"),
-- ARGV in its order (a 9th limit is too many), a last triple cut short, then
-- k keys for other than k limits. A key that holds anything but this
-- script's state is refused and left untouched ("ERR key holds ...", with
-- several keys "ERR key #i holds ..."). Under maxmemory with noeviction, a
-- writing call fails with OOM and writes nothing. The clock is Redis TIME;
-- a clock that steps back decides as of the time the state records.
--
`, a.Name, a.Summary, ContractVersion, power(a.MaxLimit), burst, capacity)
	for _, l := range a.About {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
}

// library is the Functions library: the helpers and each algorithm's
// top-level definitions once, at FUNCTION LOAD; each algorithm's per-call
// code as a function.
func library(src fs.FS, algos []Algorithm, helpers, name string) (string, error) {
	text, err := fs.ReadFile(src, "library.lua")
	if err != nil {
		return "", err
	}
	t := string(text)
	h, rest, ok1 := strings.Cut(t, "--@helpers\n")
	a, rest, ok2 := strings.Cut(rest, "--@algorithms\n")
	closing, rest, ok3 := strings.Cut(rest, "--@register")
	_, rest, ok4 := strings.Cut(rest, "\n") // the rest of the marker's line
	each, last, ok5 := strings.Cut(rest, "--@end register\n")
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || a != "" {
		return "", fmt.Errorf("library.lua: want the sections --@helpers, --@algorithms, --@register ... --@end register")
	}
	r := strings.NewReplacer("@LIBRARY@", name, "@CONTRACT@", ContractVersion, "@ALGORITHMS@", names(algos))
	var b strings.Builder
	b.WriteString(r.Replace(h))
	b.WriteString(helpers + "\n\n")
	for _, a := range algos {
		fmt.Fprintf(&b, "-- ==== %s ====\n", a.Name)
		constants(&b, a, true)
		writeLines(&b, a.Top)
		fmt.Fprintf(&b, "local function %s(KEYS, ARGV)\n", a.Name)
		for _, l := range libraryReads(append(scriptOnly(a.Fast, false), replaceAll(a.Body, fullMacro, "FULL[$1]")...)) {
			if l != "" {
				b.WriteString("  ")
			}
			b.WriteString(l + "\n")
		}
		b.WriteString("end\n\n")
	}
	b.WriteString(closing)
	// The version is the SHA1 of the code so far: each function is then
	// registered under its contract name and under a name bound to this
	// version (VersionedName), which a client that bundles this library
	// calls, so that it never runs another version.
	sum := sha1.Sum([]byte(b.String()))
	version := hex.EncodeToString(sum[:])
	for _, a := range algos {
		fn := name + "_" + a.Name
		b.WriteString(strings.NewReplacer("@name@", a.Name, "@function@", fn, "@function_v@", VersionedName(fn, version),
			"@function_ro_v@", VersionedName(fn+"_ro", version)).Replace(each))
	}
	b.WriteString(strings.NewReplacer("@LIBRARY@", name, "@LIBRARY_VERSION@", version).Replace(last))
	if m := placeholder.FindString(b.String()); m != "" {
		return "", fmt.Errorf("library.lua: a placeholder the generator does not fill: %s", m)
	}
	return b.String(), nil
}

func names(algos []Algorithm) string {
	var s []string
	for _, a := range algos {
		s = append(s, a.Name)
	}
	return strings.Join(s, ", ")
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

// LibraryVersion returns the version string the library's redisrate_version
// function returns, read back from the library's source.
func LibraryVersion(lib string) string {
	m := regexp.MustCompile(`callback = function\(\) return '([0-9a-f]{40})' end`).FindStringSubmatch(lib)
	if m == nil {
		return ""
	}
	return m[1]
}

// reset fills scripts/src/reset.lua's placeholders from the manifests: the
// shape of every string state and the sliding log's marker and range.
func reset(src fs.FS, algos []Algorithm) (string, error) {
	text, err := fs.ReadFile(src, "reset.lua")
	if err != nil {
		return "", err
	}
	var shapes []string
	marker, logMax := "", int64(0)
	for _, a := range algos {
		if a.Log {
			marker, logMax = a.Tag, a.TimeMax
			continue
		}
		big := -1
		if a.BigAt > 0 {
			big = a.BigAt % a.Fields
		}
		signed := -1
		if a.Signed > 0 {
			signed = a.Signed % a.Fields
		}
		shapes = append(shapes, fmt.Sprintf("['%s'] = { %d, %d, %d, %d, %d }", a.Tag, a.Fields, timeAt(a), a.TimeMax, big, signed))
	}
	out := strings.NewReplacer("@VERSION@", ContractVersion, "@SHAPES@", "{ "+strings.Join(shapes, ", ")+" }",
		"@MARKER@", marker, "@LOG_MAX@", strconv.FormatInt(logMax, 10)).Replace(string(text))
	if i := strings.Index(out, "@"); i >= 0 {
		return "", fmt.Errorf("reset.lua: a placeholder the generator does not fill: %.20q", out[i:])
	}
	return out, nil
}

func sha(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func manifest(algos []Algorithm, files Files) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated by scripts/internal/gen from scripts/src; DO NOT EDIT.\n\npackage scripts\n\n")
	fmt.Fprintf(&b, "// ContractVersion is the version of the script contract (CONTRACT.md) the scripts implement.\nconst ContractVersion = %q\n\n", ContractVersion)
	fmt.Fprintf(&b, "// LibraryName is the name of the Functions library (FUNCTION LOAD, FUNCTION DELETE).\nconst LibraryName = %q\n\n", LibraryName)
	fmt.Fprintf(&b, "// LibraryVersion is what FCALL_RO redisrate_version 0 returns for this library: the SHA1 of its code.\nconst LibraryVersion = %q\n\n", LibraryVersion(string(files["library.lua"])))
	suffix := VersionedName("", LibraryVersion(string(files["library.lua"])))
	fmt.Fprintf(&b, "// VersionSuffix ends the name of each function bound to this library version: redisrate_gcra%s runs this version of redisrate_gcra or fails with \"Function not found\".\nconst VersionSuffix = %q\n\n", suffix, suffix)
	b.WriteString("// specs is the manifest of every script, in the order of the contract; Source is filled from the embedded files.\nvar specs = []Spec{\n")
	for _, a := range algos {
		fmt.Fprintf(&b, "\t{Name: %q, Summary: %q, SHA1: %q, Function: %q},\n",
			a.Name, a.Summary, sha(files[a.Name+".lua"]), LibraryName+"_"+a.Name)
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "// resetSHA1 is the SHA1 of reset.lua.\nconst resetSHA1 = %q\n", sha(files["reset.lua"]))
	return format.Source([]byte(b.String()))
}

// storage writes the rest of each manifest, the state's format and the
// arguments' rules, for the module's internal/manifest.
func storage(algos []Algorithm) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated by scripts/internal/gen from scripts/src; DO NOT EDIT.\n\npackage manifest\n\nimport \"github.com/redisrate/redisrate/scripts\"\n\n")
	b.WriteString("// specs is the manifest of every script, in the order of the contract; the scripts.Spec of each is filled from package scripts.\nvar specs = []Spec{\n")
	for _, a := range algos {
		fmt.Fprintf(&b, "\t{Spec: scripts.Spec{Name: %q}, Tag: %q, Window: %t, Log: %t, Fields: %d, TimeField: %d, TimeMax: %d, MaxLimit: %d, Range: %q},\n",
			a.Name, a.Tag, a.Window, a.Log, a.Fields, a.TimeAt, a.TimeMax, a.MaxLimit, a.Range)
	}
	b.WriteString("}\n")
	return format.Source([]byte(b.String()))
}

func algorithmConstants(algos []Algorithm) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated by scripts/internal/gen from scripts/src; DO NOT EDIT.\n\npackage redisrate\n\n")
	b.WriteString("// The algorithms, one per script, in the order of scripts.Specs. The zero Algorithm is GCRA.\nconst (\n")
	for i, a := range algos {
		comment := strings.ToUpper(a.Summary[:1]) + a.Summary[1:]
		fmt.Fprintf(&b, "\t// %s is %s.lua. %s.\n", a.Go, a.Name, comment)
		if i == 0 {
			fmt.Fprintf(&b, "\t%s Algorithm = iota\n", a.Go)
		} else {
			fmt.Fprintf(&b, "\t%s\n", a.Go)
		}
	}
	b.WriteString(")\n\n// numAlgorithms is the number of algorithms.\n")
	fmt.Fprintf(&b, "const numAlgorithms = %d\n", len(algos))
	return format.Source([]byte(b.String()))
}
