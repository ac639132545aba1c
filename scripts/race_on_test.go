//go:build race

package scripts_test

// raceEnabled: the tables of many thousand calls (guarantee 12, the
// specialized copies) check Lua in Redis, where the race detector finds
// nothing and only slows the client some threefold: under it they run a
// tenth of their calls, and make test runs them whole without it.
const raceEnabled = true
