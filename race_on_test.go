//go:build race

package redisrate

// raceEnabled: the race detector allocates on its own, so allocation
// counts are checked without it (make test runs them in a second pass).
const raceEnabled = true
