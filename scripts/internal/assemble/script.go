package assemble

import (
	"strconv"
	"strings"
)

// script is a's standalone script: its header, the string functions, then
// the common call's specialized copy, which returns before the constants
// and the helpers below make their closures (some 500 instructions each,
// on every call), then the general code.
func (g *generator) script(a Algorithm) []byte {
	var b strings.Builder
	g.writeHeader(&b, a)
	b.WriteString(g.stringFns + "\n\n")
	writeLines(&b, g.expandMacros(scriptOnly(a.Fast, true), script, g.values(a)))
	g.writeConstants(&b, a, false)
	b.WriteString(g.scriptHelpers + "\n\n")
	writeLines(&b, a.Top)
	writeLines(&b, g.expandMacros(a.Body, script, g.values(a)))
	return []byte(b.String())
}

// writeHeader writes header.lua's header for a, then a's own comment
// lines.
func (g *generator) writeHeader(b *strings.Builder, a Algorithm) {
	g.writeTemplate(b, g.header, "header", a, a.flags())
	writeLines(b, a.About)
	b.WriteString("\n")
}

// writeConstants writes constants.lua's constants for a, in a script or
// the library: what the shared sections read of the algorithm.
func (g *generator) writeConstants(b *strings.Builder, a Algorithm, inLibrary bool) {
	flags := a.flags()
	flags["library"] = inLibrary
	g.writeTemplate(b, g.constants, "constants", a, flags)
	b.WriteString("\n")
}

// writeTemplate writes t's definition name for a: its --@if lines kept by
// flags, the macros written as a script writes them (the library's
// patterns of n limits, made at load, are a script's), and a's manifest.
func (g *generator) writeTemplate(b *strings.Builder, t *templates, name string, a Algorithm, flags map[string]bool) {
	lines, err := g.expand(strings.Split(t.get(name, ""), "\n"), flags)
	if err != nil {
		t.fail(err)
	}
	values := g.values(a)
	for _, l := range g.expandMacros(lines, script, values) {
		b.WriteString(values.Replace(l) + "\n")
	}
}

// power is v as the errors and the header write it: 10^n for a power of
// ten past 5 digits.
func power(v int64) string {
	s := strconv.FormatInt(v, 10)
	if len(s) > 5 && strings.Trim(s[1:], "0") == "" && s[0] == '1' {
		return "10^" + strconv.Itoa(len(s)-1)
	}
	return s
}

// values is a's manifest as the template files name it, @NAME@ ... .
func (g *generator) values(a Algorithm) *strings.Replacer {
	return strings.NewReplacer("@NAME@", a.Name, "@TAG@", a.Tag, "@SUMMARY@", a.Summary,
		"@CONTRACT@", ContractVersion, "@MAX_LIMIT@", strconv.FormatInt(a.MaxLimit, 10),
		"@MAX_LIMIT_TEXT@", power(a.MaxLimit), "@TIME_MAX@", strconv.FormatInt(a.TimeMax, 10),
		"@TIME_AT@", strconv.Itoa(a.TimeAt), "@FIELDS@", strconv.Itoa(a.Fields),
		"@STATE_FIELDS@", g.stateFields(a), "@LIMIT@", g.limitPattern(a))
}
