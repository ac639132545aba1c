package grpclimit

// units converts a cost to the type redisrate's calls take.
func units(n int64) float64 { return float64(n) }
