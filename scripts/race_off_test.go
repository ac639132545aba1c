//go:build !race

package scripts_test

const raceEnabled = false
