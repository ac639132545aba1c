// Package scripts holds the redisrate Lua scripts, the product itself: one
// atomic script per algorithm, the Functions library that registers them all,
// and the reset script, embedded byte for byte as they are in this directory
// (people copy the .lua files into other stacks), with the manifest that says
// what each one is.
//
// The .lua files are generated from scripts/src by `go generate ./scripts`:
// the shared sections (argument parsing, state, verdict, reply) are written
// once there, and each generated file stands alone. The tests in this package
// hold every script to the contract (CONTRACT.md) on miniredis and, where a
// redis-server is installed, on real Redis.
package scripts

//go:generate go run ./internal/gen

import (
	"embed"
	"fmt"
)

//go:embed *.lua
var files embed.FS

// Spec describes one script: its manifest (written once, in the script's
// source) and its code.
type Spec struct {
	// Name is the script's file name without ".lua", e.g. "token_bucket".
	Name string
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
	// MaxLimit caps limit (and burst): 10^15, or 10000 for sliding_log.
	MaxLimit int64
	// Range names the rule that keeps a limit's arithmetic exact, which the
	// script enforces with an error: "continuous" (burst * period_us /
	// gcd(limit, period_us) <= 2^52), "refill" (ceil(burst / limit) *
	// period_us <= 2^53), "weighted" (3 * limit * period_ms <= 2^53), or ""
	// for none.
	Range string
	// Summary is one line on the algorithm.
	Summary string
	// Source is the script, byte for byte scripts/<Name>.lua.
	Source string
	// SHA1 is the hex SHA1 of Source: the name EVALSHA takes.
	SHA1 string
	// Function is the script's function in the Functions library, e.g.
	// "redisrate_gcra"; Function + "_ro" is its read-only variant, which
	// always decides as mode "check".
	Function string
}

// Specs returns every script's Spec, in the order of the contract: gcra,
// token_bucket, leaky_bucket, sliding_window, fixed_window, sliding_log.
func Specs() []Spec {
	out := make([]Spec, len(specs))
	copy(out, specs)
	return out
}

// Lookup returns the Spec of the script called name (e.g. "gcra").
func Lookup(name string) (Spec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Library is the Functions library (library.lua), for FUNCTION LOAD
// REPLACE: every script as a function, with what runs once defined once.
var Library = mustRead("library.lua")

// ResetSource is reset.lua: it deletes KEYS[1] only when the key holds the
// state of one of the scripts, and refuses any other key, untouched.
var ResetSource = mustRead("reset.lua")

// ResetSHA1 is the hex SHA1 of ResetSource.
const ResetSHA1 = resetSHA1

func init() {
	for i := range specs {
		specs[i].Source = mustRead(specs[i].Name + ".lua")
	}
}

func mustRead(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("scripts: embedded %s is missing: %v", name, err))
	}
	return string(b)
}
