package redisrate

// RaceEnabled tells the external tests (package redisrate_test) whether the
// race detector is on, to size their randomized and repeated tables.
const RaceEnabled = raceEnabled
