// Package redisrate is a rate limiter for services that already run Redis.
//
// The decisions are made by atomic Lua scripts, one per algorithm, that read the
// clock with Redis TIME: GCRA, token bucket, leaky bucket, sliding window, fixed
// window and sliding log. The scripts are the product (see Scripts to export
// them for other stacks); this package embeds them, runs them with EVALSHA
// (loading them again on NOSCRIPT) and decodes their replies into Result.
//
// It works with every go-redis v9 client: *redis.Client, *redis.ClusterClient,
// *redis.Ring, the Sentinel failover client and redis.UniversalClient.
package redisrate

//go:generate go run ./internal/scriptgen/gen

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Script is one of the bundled Lua scripts, byte for byte what the Limiter runs.
type Script struct {
	Algorithm Algorithm
	Name      string // file name without .lua, e.g. "gcra"
	Source    string // the Lua source
	SHA1      string // hex SHA1 of Source, the name EVALSHA takes
}

var (
	scripts    [numAlgorithms]Script
	specs      [numAlgorithms]spec
	wholeLine  = regexp.MustCompile(`(?m)^local WHOLE = (true|false)\b`)
	windowLine = regexp.MustCompile(`(?m)^local WINDOW = (true|false)\b`)
	algoNames  = [numAlgorithms]string{"gcra", "token_bucket", "leaky_bucket", "sliding_window", "fixed_window", "sliding_log"}
)

// spec is what the Go side needs to know of a script to validate its
// arguments, read from the script's own WHOLE and WINDOW constants so that it
// is written only once.
type spec struct {
	whole  bool // limit, burst and cost must be whole numbers
	window bool // burst may only be absent, 0 or equal to limit
}

func init() {
	for a := Algorithm(0); a < numAlgorithms; a++ {
		name := algoNames[a]
		src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
		if err != nil {
			panic(fmt.Sprintf("redisrate: embedded script %s.lua is missing: %v", name, err))
		}
		sum := sha1.Sum(src)
		scripts[a] = Script{Algorithm: a, Name: name, Source: string(src), SHA1: hex.EncodeToString(sum[:])}
		whole, window := wholeLine.FindStringSubmatch(string(src)), windowLine.FindStringSubmatch(string(src))
		if whole == nil || window == nil {
			panic(fmt.Sprintf("redisrate: embedded script %s.lua does not declare WHOLE and WINDOW", name))
		}
		specs[a] = spec{whole: whole[1] == "true", window: window[1] == "true"}
	}
}

// Scripts returns every bundled script, in the order of the Algorithm
// constants, for loading into Redis from other stacks or deploy pipelines.
func Scripts() []Script {
	out := make([]Script, len(scripts))
	copy(out, scripts[:])
	return out
}
