//go:build !race

package redisrate

const raceEnabled = false
