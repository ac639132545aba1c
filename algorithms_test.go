package redisrate

import (
	"fmt"
	"testing"
	"time"
)

// row is one call of an exact table: at ms after the table's start, with
// cost and mode, the reply must be want and the key's PTTL ttl afterwards
// (-2: no key; noTTL: not checked).
type row struct {
	at   int64
	cost string
	mode string
	want [6]int64
	ttl  int64
}

const noTTL = -99

// runTable plays rows on a fresh key with ARGV limit period burst, the clock
// starting at start and moved forward only (TTLs run out as on Redis).
func runTable(t *testing.T, a Algorithm, start time.Time, limit, period, burst string, rows []row) {
	t.Helper()
	f := newFakeRedis(t)
	f.setClock(start)
	for i, r := range rows {
		at := start.Add(time.Duration(r.at) * time.Millisecond)
		if d := at.Sub(f.now); d > 0 {
			f.advance(d)
		} else if d < 0 {
			t.Fatalf("row %d goes back in time", i)
		}
		before := f.dump("k")
		got := f.mustEval(a, "k", limit, period, burst, r.cost, r.mode)
		if !equalInts(got, r.want[:]) {
			t.Errorf("row %d (t=%d ms, cost %s %s): got %v, want %v", i, r.at, r.cost, r.mode, got, r.want)
		}
		if got[0] == 0 || r.cost == "0" || r.mode == "check" {
			if after := f.dump("k"); after != before {
				t.Errorf("row %d: wrote %s over %s", i, after, before)
			}
		}
		if r.ttl != noTTL {
			if ttl := f.rdb.PTTL(t.Context(), "k").Val(); ttl != time.Duration(r.ttl)*time.Millisecond && !(r.ttl == -2 && ttl == -2) {
				t.Errorf("row %d: PTTL %v, want %d ms", i, ttl, r.ttl)
			}
		}
	}
}

// TestTokenBucketTable: 2 tokens every 1000 ms, burst 5; refills counted
// from the call that created the state.
func TestTokenBucketTable(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 250_000, time.UTC) // 250 µs into a ms
	runTable(t, TokenBucket, start, "2", "1000", "5", []row{
		{0, "1", "", [6]int64{1, 4, 0, 1000, 5, 1}, 1000},
		{0, "4", "", [6]int64{1, 0, 0, 3000, 5, 1}, 3000}, // 5 tokens back in 3 refills
		{0, "1", "", [6]int64{0, 0, 1000, 3000, 5, 1}, 3000},
		{999, "1", "", [6]int64{0, 0, 1, 2001, 5, 1}, 2001},
		{1000, "1", "", [6]int64{1, 1, 0, 2000, 5, 1}, 2000}, // the first refill, all at once
		{1500, "2", "", [6]int64{0, 1, 500, 1500, 5, 1}, 1500},
		{2000, "2", "", [6]int64{1, 1, 0, 2000, 5, 1}, 2000},
		{2999, "0", "", [6]int64{1, 1, 0, 1001, 5, 1}, 1001},
		{4000, "0", "", [6]int64{1, 5, 0, 0, 5, 1}, -2}, // reset_after was honest: full, key gone
		// a new phase: refills counted from t=5500, not from t=0
		{5500, "5", "", [6]int64{1, 0, 0, 3000, 5, 1}, 3000},
		{6499, "1", "", [6]int64{0, 0, 1, 2001, 5, 1}, 2001},
		{6500, "0", "", [6]int64{1, 2, 0, 2000, 5, 1}, 2000},
		{7400, "2", "", [6]int64{1, 0, 0, 2100, 5, 1}, 2100},
		{7500, "3", "check", [6]int64{0, 2, 1000, 2000, 5, 1}, 2000},
		{8500, "3", "", [6]int64{1, 1, 0, 2000, 5, 1}, 2000},
		{8500, "2.5", "", [6]int64{0, 1, 1000, 2000, 5, 1}, 2000},
		{9500, "2.5", "", [6]int64{1, 0, 0, 3000, 5, 1}, 3000}, // 0.5 left: 3 refills to full
		{10499, "0.5", "check", [6]int64{1, 0, 0, 2001, 5, 1}, 2001},
		{10500, "0", "", [6]int64{1, 2, 0, 2000, 5, 1}, 2000}, // 2.5 left
		{11000, "6", "", [6]int64{0, 2, -1, 1500, 5, 1}, 1500},
		{11500, "6", "", [6]int64{0, 4, -1, 1000, 5, 1}, 1000}, // 4.5 left
		{12500, "0", "", [6]int64{1, 5, 0, 0, 5, 1}, -2},
	})
}

// TestLeakyBucketPublishedVectors: the leaky bucket decides as GCRA does,
// so it reproduces GCRA's published vectors (gcra_test.go) too.
func TestLeakyBucketPublishedVectors(t *testing.T) {
	runTable(t, LeakyBucket, epoch2026, "1", "1000", "5", []row{
		{0, "6", "", [6]int64{0, 5, -1, 0, 5, 1}, -2},
		{0, "1", "", [6]int64{1, 4, 0, 1000, 5, 1}, 1000},
		{0, "1", "", [6]int64{1, 3, 0, 2000, 5, 1}, 2000},
		{0, "1", "", [6]int64{1, 2, 0, 3000, 5, 1}, 3000},
		{0, "1", "", [6]int64{1, 1, 0, 4000, 5, 1}, 4000},
		{0, "1", "", [6]int64{1, 0, 0, 5000, 5, 1}, 5000},
		{0, "1", "", [6]int64{0, 0, 1000, 5000, 5, 1}, 5000},
		{3000, "1", "", [6]int64{1, 2, 0, 3000, 5, 1}, 3000},
		{3100, "1", "", [6]int64{1, 1, 0, 3900, 5, 1}, 3900},
		{4000, "1", "", [6]int64{1, 1, 0, 4000, 5, 1}, 4000},
		{8000, "1", "", [6]int64{1, 4, 0, 1000, 5, 1}, 1000},
		{9500, "1", "", [6]int64{1, 4, 0, 1000, 5, 1}, 1000},
		{9500, "0", "", [6]int64{1, 4, 0, 1000, 5, 1}, 1000},
		{9500, "2", "", [6]int64{1, 2, 0, 3000, 5, 1}, 3000},
		{9500, "5", "", [6]int64{0, 2, 3000, 3000, 5, 1}, 3000},
		{15000, "6", "", [6]int64{0, 5, -1, 0, 5, 1}, -2},
	})
}

// TestGCRATable: a fractional rate and a burst below it, from a clock a
// fraction of a ms in: 2.5 per 1000 ms (one unit every 400 ms), burst 2.
func TestGCRATable(t *testing.T) {
	for _, a := range []Algorithm{GCRA, LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			runTable(t, a, epoch2026, "2.5", "1000", "2", []row{
				{0, "1", "", [6]int64{1, 1, 0, 400, 2, 1}, 400},
				{0, "0.5", "", [6]int64{1, 0, 0, 600, 2, 1}, 600}, // 0.5 left
				{0, "1", "", [6]int64{0, 0, 200, 600, 2, 1}, 600},
				{199, "1", "", [6]int64{0, 0, 1, 401, 2, 1}, 401},
				{200, "1", "", [6]int64{1, 0, 0, 800, 2, 1}, 800}, // 0 left
				{500, "0", "", [6]int64{1, 0, 0, 500, 2, 1}, 500}, // 0.75 left
				{600, "0", "", [6]int64{1, 1, 0, 400, 2, 1}, 400},
				{1000, "0", "", [6]int64{1, 2, 0, 0, 2, 1}, -2},
				{1000, "2.5", "check", [6]int64{0, 2, -1, 0, 2, 1}, -2},
				{1000, "2", "check", [6]int64{1, 0, 0, 800, 2, 1}, -2},
			})
		})
	}
}

// TestSlidingWindowTable: 4 per 1000 ms, windows aligned to whole seconds,
// the previous window weighted by its overlap with the last 1000 ms.
func TestSlidingWindowTable(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) // a window starts here
	runTable(t, SlidingWindow, start, "4", "1000", "", []row{
		{0, "1", "", [6]int64{1, 3, 0, 2000, 4, 1}, 2000},
		{250, "2", "", [6]int64{1, 1, 0, 1750, 4, 1}, 1750},
		// 3 in this window: 2 more fit once 3 * (1000 - into) / 1000 + 2 <= 4 in
		// the next, at into = 334 ms
		{500, "2", "", [6]int64{0, 1, 834, 1500, 4, 1}, 1500},
		{1333, "2", "", [6]int64{0, 1, 1, 667, 4, 1}, 667},
		{1334, "2", "", [6]int64{1, 0, 0, 1666, 4, 1}, 1666},
		{1999, "0", "", [6]int64{1, 1, 0, 1001, 4, 1}, 1001},
		{2000, "0", "", [6]int64{1, 2, 0, 1000, 4, 1}, 1000}, // 2 of the previous window, at full weight
		{2500, "3", "", [6]int64{1, 0, 0, 1500, 4, 1}, 1500}, // 2 * 0.5 + 3 = 4
		{2500, "5", "", [6]int64{0, 0, -1, 1500, 4, 1}, 1500},
		{2500, "0.5", "", [6]int64{0, 0, 250, 1500, 4, 1}, 1500},
		{3000, "1", "check", [6]int64{1, 0, 0, 2000, 4, 1}, 1000}, // 3 at full weight, 1 more
		{3600, "1.5", "", [6]int64{1, 1, 0, 1400, 4, 1}, 1400},    // 3 * 0.4 + 1.5 = 2.7: 1.3 left
		{4000, "0", "", [6]int64{1, 2, 0, 1000, 4, 1}, 1000},      // 1.5 at full weight
		{5000, "0", "", [6]int64{1, 4, 0, 0, 4, 1}, -2},
	})
}

// TestFixedWindowTable: 3 per 1000 ms, each window opened by the first
// request after the last one ended, not aligned to the clock.
func TestFixedWindowTable(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 250_000, time.UTC)
	runTable(t, FixedWindow, start, "3", "1000", "", []row{
		{0, "1", "", [6]int64{1, 2, 0, 1000, 3, 1}, 1000},
		{400, "2", "", [6]int64{1, 0, 0, 600, 3, 1}, 600},
		{500, "1", "", [6]int64{0, 0, 500, 500, 3, 1}, 500},
		{999, "1", "check", [6]int64{0, 0, 1, 1, 3, 1}, 1},
		{1000, "1", "", [6]int64{1, 2, 0, 1000, 3, 1}, 1000}, // a new window, from now
		{1700, "3", "", [6]int64{0, 2, 300, 300, 3, 1}, 300},
		{2500, "0", "", [6]int64{1, 3, 0, 0, 3, 1}, -2},
		{2600, "3", "", [6]int64{1, 0, 0, 1000, 3, 1}, 1000}, // opened at 2600, not 2000 or 2500
		{2600, "4", "", [6]int64{0, 0, -1, 1000, 3, 1}, 1000},
		{3599, "1", "", [6]int64{0, 0, 1, 1, 3, 1}, 1},
		{3600, "1", "", [6]int64{1, 2, 0, 1000, 3, 1}, 1000},
	})
}

// TestSlidingLogTable: 3 per 1000 ms over the last 1000 ms, exactly.
func TestSlidingLogTable(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 250_000, time.UTC)
	runTable(t, SlidingLog, start, "3", "1000", "", []row{
		{0, "1", "", [6]int64{1, 2, 0, 1000, 3, 1}, 1000},
		{300, "1", "", [6]int64{1, 1, 0, 1000, 3, 1}, 1000},
		{600, "1", "", [6]int64{1, 0, 0, 1000, 3, 1}, 1000},
		{700, "1", "", [6]int64{0, 0, 300, 900, 3, 1}, 900},
		{999, "2", "", [6]int64{0, 0, 301, 601, 3, 1}, 601}, // the 2 oldest must leave
		{999, "1", "", [6]int64{0, 0, 1, 601, 3, 1}, 601},
		{1000, "1", "", [6]int64{1, 0, 0, 1000, 3, 1}, 1000}, // the unit of t=0 just left
		{1300, "0", "", [6]int64{1, 1, 0, 700, 3, 1}, 700},
		{1300, "2", "", [6]int64{0, 1, 300, 700, 3, 1}, 700},
		{1600, "2", "check", [6]int64{1, 0, 0, 1000, 3, 1}, 400},
		{2000, "3", "", [6]int64{1, 0, 0, 1000, 3, 1}, 1000},
		{2000, "4", "", [6]int64{0, 0, -1, 1000, 3, 1}, 1000},
		{3000, "0", "", [6]int64{1, 3, 0, 0, 3, 1}, -2},
	})
}

// TestTTLNoLongerThanNeeded: after every admission the key's TTL is the
// slowest limit's reset_after, and the key is gone exactly then.
func TestTTLNoLongerThanNeeded(t *testing.T) {
	for a := Algorithm(0); a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			args := []any{"5", "1000", "", "2", "", "3", "60000", ""}
			r := f.mustEval(a, "k", args...)
			ttl := f.rdb.PTTL(t.Context(), "k").Val()
			// the 3/min limit binds (fewer left) and empties last
			if r[5] != 2 || time.Duration(r[3])*time.Millisecond != ttl {
				t.Fatalf("reply %v, PTTL %v: want limit #2 binding with reset_after = PTTL", r, ttl)
			}
			f.advance(ttl - time.Millisecond)
			if n := f.rdb.Exists(t.Context(), "k").Val(); n != 1 {
				t.Fatalf("key gone 1 ms before its reset_after")
			}
			if r := f.mustEval(a, "k", "5", "1000", "", "0", "", "3", "60000", ""); r[5] != 2 || r[1] >= 3 || r[3] != 1 {
				t.Errorf("1 ms before reset_after: %v, want limit #2 not yet full", r)
			}
			f.advance(time.Millisecond)
			if n := f.rdb.Exists(t.Context(), "k").Val(); n != 0 {
				t.Errorf("key still there at reset_after: %s", f.dump("k"))
			}
			if r := f.mustEval(a, "k", args...); fmt.Sprint(r[:3], r[4:]) != "[1 1 0] [3 2]" {
				t.Errorf("at reset_after: %v, want full capacity again", r)
			}
		})
	}
}

// TestSlidingWindowAligned: windows start at multiples of period_ms since
// the epoch, not at the first request: a first call 700.25 ms into a
// 1000 ms window has 300 ms left of it, and the next window weighs it.
func TestSlidingWindowAligned(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 700_250_000, time.UTC)
	runTable(t, SlidingWindow, start, "2", "1000", "", []row{
		{0, "2", "", [6]int64{1, 0, 0, 1300, 2, 1}, 1300}, // gone at 12:00:02.000
		// 1 more fits once 2 * (1000 - into) / 1000 + 1 <= 2: into 500 ms of
		// the next window, 12:00:01.500
		{0, "1", "", [6]int64{0, 0, 800, 1300, 2, 1}, 1300},
		{799, "1", "", [6]int64{0, 0, 1, 501, 2, 1}, 501},
		{800, "1", "", [6]int64{1, 0, 0, 1500, 2, 1}, 1500},
	})
	// a period that does not divide a second aligns to the epoch too:
	// 12:00:01 UTC is 1795348801000 ms, 1000 ms into a window of 7000
	start = time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC)
	runTable(t, SlidingWindow, start, "3", "7000", "", []row{
		{0, "1", "", [6]int64{1, 2, 0, 13000, 3, 1}, 13000},
		{5999, "0", "", [6]int64{1, 2, 0, 7001, 3, 1}, 7001},
		{6000, "0", "", [6]int64{1, 2, 0, 7000, 3, 1}, 7000}, // the next window: 1 at full weight
		{9500, "0", "", [6]int64{1, 2, 0, 3500, 3, 1}, 3500}, // 1 * 0.5 = 0.5
		{13000, "0", "", [6]int64{1, 3, 0, 0, 3, 1}, -2},
	})
}
