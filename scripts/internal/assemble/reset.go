package assemble

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// reset fills scripts/src/reset.lua's placeholders from the manifests: the
// shape of every string state (tables.lua, shape) and the sliding log's
// marker and range.
func (g *generator) reset(algos []Algorithm) ([]byte, error) {
	text, err := fs.ReadFile(g.src, "reset.lua")
	if err != nil {
		return nil, err
	}
	marker, logMax := "", int64(0)
	for _, a := range algos {
		if a.Log {
			marker, logMax = a.Tag, a.TimeMax
		}
	}
	shapes := g.eachState(algos, g.tables.get("shape", ""), shapeValues)
	out := strings.NewReplacer("@VERSION@", ContractVersion, "@SHAPES@", shapes,
		"@MARKER@", marker, "@LOG_MAX@", strconv.FormatInt(logMax, 10)).Replace(string(text))
	if i := strings.Index(out, "@"); i >= 0 {
		return nil, fmt.Errorf("reset.lua: a placeholder the generator does not fill: %.20q", out[i:])
	}
	return []byte(out), nil
}

// shapeValues is a's state's shape as tables.lua's shape names it: the
// fields that are a recorded time, a big level and signed as the reset
// script compares them with n % per (-1: none).
func shapeValues(a Algorithm) *strings.Replacer {
	return strings.NewReplacer("@TAG@", a.Tag, "@FIELDS@", strconv.Itoa(a.Fields),
		"@TIME_AT@", strconv.Itoa(modFields(a, a.TimeAt)), "@TIME_MAX@", strconv.FormatInt(a.TimeMax, 10),
		"@BIG_AT@", strconv.Itoa(modFields(a, a.BigAt)), "@SIGNED_AT@", strconv.Itoa(modFields(a, a.Signed)))
}

// modFields is field k of a (1-based) mod its number of fields, -1 for
// none (k 0).
func modFields(a Algorithm, k int) int {
	if k == 0 {
		return -1
	}
	return k % a.Fields
}
