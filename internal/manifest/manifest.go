// Package manifest holds what the scripts' manifests (scripts/src) say
// beyond package scripts' Spec: the storage format of each script's state
// and the rules of its arguments. The Go client validates limits with it,
// the demo draws with it, and the scripts' tests hold the scripts to it;
// users of the scripts read the same facts in CONTRACT.md, so package
// scripts exports only what loads and calls a script.
//
// manifest_gen.go is written by the scripts' generator (`go generate
// ./scripts`) in the same run as the scripts, so it cannot disagree with
// them; scripts' TestGeneratedFilesAreCurrent fails when it is stale.
package manifest

import (
	"fmt"
	"slices"

	"github.com/redisrate/redisrate/scripts"
)

// Spec is one script's manifest: the public scripts.Spec (name, summary,
// source, SHA1, function) and the facts below.
type Spec struct {
	scripts.Spec
	// Tag starts the script's state string, e.g. "tb:2" (name and contract
	// version); for a sorted-set state (Log), it is the marker member.
	Tag string
	// Window reports a window algorithm: burst may only be absent, 0 or
	// equal to limit, and the capacity is limit.
	Window bool
	// Log reports a sorted-set state (sliding_log) rather than a string.
	Log bool
	// Fields is how many numbers the state string holds per limit (0 for Log).
	Fields int
	// TimeField is which of a limit's Fields (from 1) is a recorded time (a
	// last refill, a window's start), which a state holds only up to
	// TimeMax; 0 for none: gcra's TAT runs ahead of the clock by up to its
	// burst, so any time below 2^53 can be its state. For Log, the
	// entries' times are held to TimeMax.
	TimeField int
	// TimeMax is the latest time a state may hold, in the unit the script
	// stores (microseconds; sliding_window's window start in milliseconds):
	// 2250-01-01, past the contract's horizon (2200) with room for clocks a
	// little past it. A later one is not state.
	TimeMax int64
	// MaxLimit caps limit (and burst): 10^12 (contract v4's range), 10^15
	// for fixed_window, whose counts stay exact to 2 * 10^15, or 10000 for
	// sliding_log.
	MaxLimit int64
	// Range names the script's exact case, which with contract v4's range
	// makes the rule the script enforces with an error: every limit and
	// burst up to MaxLimit with a period_ms up to 366 days whose full drain,
	// burst * period_ms / limit, is at most 10^12 ms, and every call within
	// the exact case, "continuous" (2 * burst * period_us <= 2^53),
	// "refill" (that, or ceil(2 * burst / limit) * period_us <= 2^53) or
	// "weighted" (2 * limit * period_us <= 2^53); "" for none (every call).
	Range string
}

func init() {
	for i := range specs {
		s, ok := scripts.Lookup(specs[i].Name)
		if !ok {
			panic(fmt.Sprintf("manifest: package scripts has no script %q", specs[i].Name))
		}
		specs[i].Spec = s
	}
}

// Specs returns every script's Spec, in the order of the contract (and of
// scripts.Specs): gcra, token_bucket, leaky_bucket, sliding_window,
// fixed_window, sliding_log.
func Specs() []Spec { return slices.Clone(specs) }

// Lookup returns the Spec of the script called name (e.g. "gcra").
func Lookup(name string) (Spec, bool) {
	i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return Spec{}, false
	}
	return specs[i], true
}
