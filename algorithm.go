package redisrate

import (
	"strconv"
	"strings"

	"github.com/redisrate/redisrate/internal/manifest"
)

// The algorithms: the scripts' manifest, by Algorithm, and how an
// algorithm is named. The constants are generated (algorithm_gen.go).

// specs is the scripts' manifest, indexed by Algorithm: names, flags and
// caps come from there and are written nowhere else.
var specs = manifest.Specs()

// Algorithm selects the script that decides: an index into scripts.Specs
// (scripts.Lookup(a.String()) is its script).
// The zero value is GCRA. The constants are generated from the scripts'
// manifest (algorithm_gen.go).
type Algorithm int

func (a Algorithm) valid() bool { return a >= 0 && a < numAlgorithms }

// String returns the script name of a, e.g. "token_bucket".
func (a Algorithm) String() string {
	if !a.valid() {
		return "Algorithm(" + strconv.Itoa(int(a)) + ")"
	}
	return specs[a].Name
}

// ParseAlgorithm returns the algorithm named s, as String prints it ("gcra",
// "token_bucket", ...; "-" may stand for "_").
func ParseAlgorithm(s string) (Algorithm, error) {
	name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	names := make([]string, len(specs))
	for a, sp := range specs {
		if sp.Name == name {
			return Algorithm(a), nil
		}
		names[a] = sp.Name
	}
	return 0, invalidf("invalid algorithm %q: must be one of %s", s, strings.Join(names, ", "))
}
