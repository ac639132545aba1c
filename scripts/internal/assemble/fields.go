package assemble

import (
	"fmt"
	"strconv"
	"strings"
)

// perField writes out the fields of a's state in lines (fields.lua): a
// line that ends in "--@each field" once for each field k, with @k@ as k
// and each definition of fields.lua it names for field k's kind; any other
// line with those definitions for the algorithm's numbers (numberKind),
// and "@stored@" and "@texts@" as the first limit's locals (s1, s2, ...
// and t1, t2, ...). A per-field line left empty is not written.
func (g *generator) perField(a Algorithm, lines []string, fast bool) []string {
	lists := strings.NewReplacer("@stored@", fieldList(a, "s"), "@texts@", fieldList(a, "t"))
	var out []string
	for _, l := range lines {
		l = lists.Replace(l)
		line, each := strings.CutSuffix(l, " --@each field")
		if !each {
			out = append(out, g.fields.fill(l, a.numberKind()))
			continue
		}
		for k := 1; k <= a.Fields; k++ {
			l := strings.ReplaceAll(g.fields.fill(line, a.fieldKind(k, fast)), "@k@", strconv.Itoa(k))
			if strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// fieldList is the first limit's locals, one per field: prefix1, prefix2, ...
func fieldList(a Algorithm, prefix string) string {
	names := make([]string, a.Fields)
	for k := range names {
		names[k] = fmt.Sprintf("%s%d", prefix, k+1)
	}
	return strings.Join(names, ", ")
}

// fieldKind is the kind of a's field k, as fields.lua names it: "time",
// "big", "positive", "signed" or "" (none). The specialized copy (fast)
// reads a big field as a positive one: it takes none past 2^53 - 1.
func (a Algorithm) fieldKind(k int, fast bool) string {
	switch k {
	case a.TimeAt:
		return "time"
	case a.BigAt:
		if fast {
			return "positive"
		}
		return "big"
	case a.Positive:
		return "positive"
	case a.Signed:
		return "signed"
	}
	return ""
}

// numberKind is the kind of a's numbers taken together: "signed" when one
// of its fields is.
func (a Algorithm) numberKind() string {
	if a.Signed > 0 {
		return "signed"
	}
	return ""
}

// limitPattern is the pattern of one limit's numbers in a's state, each
// captured as its kind's field (fields.lua): a recorded time or a positive
// field without a leading zero.
func (g *generator) limitPattern(a Algorithm) string {
	var b strings.Builder
	for k := 1; k <= a.Fields; k++ {
		b.WriteString(" " + g.fields.get("field", a.fieldKind(k, false)))
	}
	return b.String()
}

// stateFields is the pattern of the first limit's numbers in the state
// constants.lua matches (STATE): any digits, signed where the field is.
func (g *generator) stateFields(a Algorithm) string {
	var b strings.Builder
	for k := 1; k <= a.Fields; k++ {
		kind := ""
		if k == a.Signed {
			kind = "signed"
		}
		b.WriteString(" " + g.fields.get("field", kind))
	}
	return b.String()
}
