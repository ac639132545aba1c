//go:build race

package redisrate

// raceEnabled: the race detector slows miniredis's Lua about tenfold, so
// the randomized tests play shorter sequences (see -diffsteps).
const raceEnabled = true
