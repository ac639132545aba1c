package assemble

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// latestTime is 2250-01-01 in seconds since the epoch: the latest time a
// state may hold. The contract's horizon is 2200 (guarantee 6); the margin
// takes clocks a little past it, while a TTL from a state's time (at most
// 224 years from now, plus a period) stays within what every server's
// timers hold.
const latestTime = 8835955200

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

var (
	metaLine    = regexp.MustCompile(`^--! ([a-z_]+):\s*(.*)$`)
	includeLine = regexp.MustCompile(`^--@include ([a-z_]+\.lua)$`)
)

// manifestKeys is every manifest line an algorithm's source must have.
var manifestKeys = []string{"id", "go", "name", "tag", "fields", "time_field", "time_unit", "window", "range", "max_limit", "summary"}

// algorithms reads every algorithm's source (a file that opens with a
// manifest line; the others are shared sections), in the order of their
// ids.
func (g *generator) algorithms() ([]Algorithm, error) {
	names, err := fs.Glob(g.src, "*.lua")
	if err != nil {
		return nil, err
	}
	var algos []Algorithm
	for _, file := range names {
		text, err := fs.ReadFile(g.src, file)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(text, []byte("--! ")) {
			continue // a shared section
		}
		a, err := g.parse(file, text)
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

// parse reads one algorithm's source: its manifest, its comment lines, its
// top-level code and its per-call code, the general code and the
// specialized copy.
func (g *generator) parse(file string, text []byte) (Algorithm, error) {
	a, meta, lines, err := split(text)
	if err != nil {
		return a, err
	}
	if err := a.readManifest(meta); err != nil {
		return a, err
	}
	if file != a.Name+".lua" {
		return a, fmt.Errorf("name %q does not match the file name", a.Name)
	}
	flags := a.flags()
	if a.Top, err = g.expand(a.Top, flags); err != nil {
		return a, err
	}
	if a.Body, err = g.expand(lines, flags); err != nil {
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
		if a.Fast, err = g.fastCopy(a, lines); err != nil {
			return a, err
		}
	}
	if !a.Log {
		a.Body = g.perField(a, a.Body, false)
	}
	return a, nil
}

// split cuts a source into its manifest, its comment lines (About), its
// top-level code (Top, before "--@body") and the rest, not yet expanded.
func split(text []byte) (Algorithm, map[string]string, []string, error) {
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
		return a, nil, nil, fmt.Errorf("no --@body line")
	}
	return a, meta, lines, nil
}

// readManifest fills a from its manifest lines.
func (a *Algorithm) readManifest(meta map[string]string) error {
	for _, key := range manifestKeys {
		if _, ok := meta[key]; !ok {
			return fmt.Errorf("manifest line --! %s: missing", key)
		}
	}
	a.Go, a.Name, a.Tag, a.Range, a.Summary = meta["go"], meta["name"], meta["tag"], meta["range"], meta["summary"]
	a.Window, a.Log = meta["window"] == "true", meta["log"] == "true"
	var err error
	if a.ID, err = strconv.Atoi(meta["id"]); err != nil {
		return err
	}
	if a.Fields, err = strconv.Atoi(meta["fields"]); err != nil {
		return err
	}
	if a.MaxLimit, err = strconv.ParseInt(meta["max_limit"], 10, 64); err != nil {
		return err
	}
	if a.TimeAt, err = strconv.Atoi(meta["time_field"]); err != nil {
		return err
	}
	if err := a.readFieldKinds(meta); err != nil {
		return err
	}
	return a.readTimeUnit(meta["time_unit"])
}

// readFieldKinds reads which field is signed, positive and big: each
// optional, each a field other than the recorded time's, a big field the
// positive one.
func (a *Algorithm) readFieldKinds(meta map[string]string) error {
	var err error
	if v, ok := meta["signed_field"]; ok {
		if a.Signed, err = strconv.Atoi(v); err != nil || a.Signed < 1 || a.Signed > a.Fields || a.Signed == a.TimeAt {
			return fmt.Errorf("signed_field %q: want a field other than time_field", v)
		}
	}
	if v, ok := meta["positive_field"]; ok {
		if a.Positive, err = strconv.Atoi(v); err != nil || a.Positive < 1 || a.Positive > a.Fields || a.Positive == a.Signed {
			return fmt.Errorf("positive_field %q: want a field that is not signed", v)
		}
	}
	if v, ok := meta["big_field"]; ok {
		if a.BigAt, err = strconv.Atoi(v); err != nil || a.BigAt < 1 || a.BigAt > a.Fields || a.BigAt == a.TimeAt || a.BigAt != a.Positive {
			return fmt.Errorf("big_field %q: want the positive field, other than time_field", v)
		}
	}
	return nil
}

func (a *Algorithm) readTimeUnit(unit string) error {
	switch unit {
	case "us":
		a.TimeMax = latestTime * 1000000
	case "ms":
		a.TimeMax = latestTime * 1000
	default:
		return fmt.Errorf("time_unit %q: want us or ms", unit)
	}
	return nil
}

// flags is what "--@if" reads of a's manifest, for its general code.
func (a Algorithm) flags() map[string]bool {
	return map[string]bool{"window": a.Window, "log": a.Log, "range": a.Range != "", "general": true, "fast": false}
}

// expandFile is expand for the file named file, trailing newlines dropped.
func (g *generator) expandFile(file string, flags map[string]bool) ([]string, error) {
	text, err := fs.ReadFile(g.src, file)
	if err != nil {
		return nil, err
	}
	return g.expand(strings.Split(strings.TrimRight(string(text), "\n"), "\n"), flags)
}

// expand resolves --@include lines (recursively) and --@if blocks.
func (g *generator) expand(lines []string, flags map[string]bool) ([]string, error) {
	var out []string
	var c conditions
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if used, err := c.read(trimmed, flags); used || err != nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if !c.keep() {
			continue
		}
		if m := includeLine.FindStringSubmatch(trimmed); m != nil {
			sub, err := g.expandFile(m[1], flags)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m[1], err)
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, line)
	}
	if len(c) != 0 {
		return nil, fmt.Errorf("--@if without --@end")
	}
	return out, nil
}

// conditions is the --@if blocks a line is inside, innermost last: for
// each, whether its lines are kept, and whether the lines around it are.
type conditions []struct{ keepHere, keepAround bool }

func (c conditions) keep() bool {
	return len(c) == 0 || c[len(c)-1].keepAround && c[len(c)-1].keepHere
}

// read takes a --@if, --@else or --@end line (trimmed), and says whether
// it was one.
func (c *conditions) read(trimmed string, flags map[string]bool) (bool, error) {
	switch {
	case strings.HasPrefix(trimmed, "--@if "):
		flag := strings.TrimPrefix(trimmed, "--@if ")
		v, ok := flags[flag]
		if !ok {
			return true, fmt.Errorf("unknown flag %q", flag)
		}
		*c = append(*c, struct{ keepHere, keepAround bool }{v, c.keep()})
	case trimmed == "--@else":
		if len(*c) == 0 {
			return true, fmt.Errorf("--@else without --@if")
		}
		(*c)[len(*c)-1].keepHere = !(*c)[len(*c)-1].keepHere
	case trimmed == "--@end":
		if len(*c) == 0 {
			return true, fmt.Errorf("--@end without --@if")
		}
		*c = (*c)[:len(*c)-1]
	default:
		return false, nil
	}
	return true, nil
}
