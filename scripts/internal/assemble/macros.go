package assemble

import (
	"regexp"
	"strings"
)

// macro is how the sources write what a script and the library do each
// their way: "@name(arg)@", written out as macros.lua defines name.
var macro = regexp.MustCompile(`@([A-Za-z]+)\((\w+)\)@`)

// The kinds of macros.lua: how a script and how the library write a macro.
const (
	script  = "script"
	library = "library"
)

// expandMacros writes out every macro of lines as kind writes it, in a new
// slice, with a's manifest (values) in the definitions; a nil values
// leaves them as they are (the helpers name no algorithm).
func (g *generator) expandMacros(lines []string, kind string, values *strings.Replacer) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = macro.ReplaceAllStringFunc(l, func(m string) string {
			sub := macro.FindStringSubmatch(m)
			text := strings.ReplaceAll(g.macros.get(sub[1], kind), "@arg@", sub[2])
			if values != nil {
				text = values.Replace(text)
			}
			return text
		})
	}
	return out
}
