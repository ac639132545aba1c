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

// Spec describes one script: what loads and calls it. What its state
// holds and which arguments it takes is the contract's (CONTRACT.md).
type Spec struct {
	// Name is the script's file name without ".lua", e.g. "token_bucket".
	Name string
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
