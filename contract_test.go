package redisrate_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/contracttest"
)

// TestContract runs the contract's tables (internal/contracttest) on
// miniredis, whose clock only moves when a case moves it, so every reply is
// compared exactly and the time-travel cases run too. It runs at today's
// clock and at a clock in 2045, both with a fraction of a millisecond.
func TestContract(t *testing.T) {
	clocks := map[string]time.Time{
		"2026": time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC),
		"2045": time.Date(2045, 6, 30, 23, 59, 58, 999999000, time.UTC),
	}
	for name, start := range clocks {
		t.Run(name, func(t *testing.T) {
			if redisrate.RaceEnabled && name != "2026" {
				// the race detector slows miniredis's Lua tenfold; 2045 is
				// covered under -race by the exactness tests
				t.Skip("2045 clock: run without -race")
			}
			t.Parallel()
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2})
			t.Cleanup(func() { _ = rdb.Close() })
			now := start
			mr.SetTime(now)
			contracttest.Run(t, contracttest.Engine{
				Client:            rdb,
				NoReadOnlyScripts: true, // miniredis refuses TIME under EVAL_RO
				Advance: func(d time.Duration) {
					now = now.Add(d)
					mr.SetTime(now)
					mr.FastForward(d)
				},
			})
		})
	}
}
