package assemble

import (
	"fmt"
	"regexp"
	"strings"
)

// fastCopy is a's copy specialized for one key and one limit: fast.lua,
// the lines of the source's fast region expanded with the flag fast set
// and general unset, and fast_reply.lua, each field written out and the
// constants the copy reads written as their values.
func (g *generator) fastCopy(a Algorithm, lines []string) ([]string, error) {
	flags := a.flags()
	flags["general"], flags["fast"] = false, true
	all, err := g.expand(lines, flags)
	if err != nil {
		return nil, err
	}
	if copied, _, err := fastRegion(all); err != nil || copied < 0 {
		return nil, fmt.Errorf("fast: the region is not whole with the flag fast set")
	}
	head, err := g.expandFile("fast.lua", flags)
	if err != nil {
		return nil, fmt.Errorf("fast.lua: %w", err)
	}
	tail, err := g.expandFile("fast_reply.lua", flags)
	if err != nil {
		return nil, fmt.Errorf("fast_reply.lua: %w", err)
	}
	copied := append(append(head, regionLines(all)...), tail...)
	fast, err := g.inlineConstants(a, g.perField(a, copied, true))
	if err != nil {
		return nil, fmt.Errorf("fast: %w", err)
	}
	return fast, nil
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
	_, _, inside := cutMarked(lines, "--@fast begin", "--@fast end")
	return inside
}

// inlineConstants writes the constants the specialized copy reads as
// their values (constants.lua, inline), and "@TAG@" as the tag. A
// constant the copy reads that is not written as its value would be an
// undefined global there: the generator fails instead.
func (g *generator) inlineConstants(a Algorithm, lines []string) ([]string, error) {
	values, inlined := g.inlineValues(a)
	out := make([]string, len(lines))
	for i, l := range lines {
		l = strings.ReplaceAll(l, "@TAG@", a.Tag)
		code, comment, _ := strings.Cut(l, "--")
		code = inlined.ReplaceAllStringFunc(code, func(name string) string { return values[name] })
		if name := otherConstant.FindString(code); name != "" {
			return nil, fmt.Errorf("the specialized copy reads the constant %s, which a script declares after it: write it as a value (constants.lua, inline)", name)
		}
		if comment != "" || strings.HasSuffix(l, "--") {
			code += "--" + comment
		}
		out[i] = code
	}
	return out, nil
}

// inlineValues is each constant constants.lua writes as its value in the
// specialized copy, by name, and the pattern that finds their names.
func (g *generator) inlineValues(a Algorithm) (map[string]string, *regexp.Regexp) {
	values, manifest := map[string]string{}, g.values(a)
	names := g.constants.kinds("inline")
	for _, name := range names {
		values[name] = manifest.Replace(g.constants.get("inline", name))
	}
	for i, name := range names {
		names[i] = regexp.QuoteMeta(name)
	}
	return values, regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
}

// otherConstant finds the other constants a script declares (constants.lua).
var otherConstant = regexp.MustCompile(`\b(NAME|LIMIT_RULE|BURST_RULE|TIME_AT|FIELDS|STATE)\b`)

// scriptOnly is lines without the "--@scriptonly begin" and "--@scriptonly
// end" markers: keeping what is between them (a script, keep) or not (the
// library, which defines those functions once, at load).
func scriptOnly(lines []string, keep bool) []string {
	all, outside, _ := cutMarked(lines, "--@scriptonly begin", "--@scriptonly end")
	if keep {
		return all
	}
	return outside
}

// cutMarked cuts lines at the marker lines begin and end (trimmed): all of
// them without the markers, those outside the markers, and those between.
func cutMarked(lines []string, begin, end string) (all, outside, inside []string) {
	in := false
	for _, l := range lines {
		switch strings.TrimSpace(l) {
		case begin:
			in = true
			continue
		case end:
			in = false
			continue
		}
		all = append(all, l)
		if in {
			inside = append(inside, l)
		} else {
			outside = append(outside, l)
		}
	}
	return all, outside, inside
}
