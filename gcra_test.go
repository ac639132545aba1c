package redisrate

import (
	"testing"
	"time"
)

// TestGCRAPublishedVectors replays a peer's published GCRA vectors (limit 1
// per 1000 ms, burst 5) in our reply conventions.
func TestGCRAPublishedVectors(t *testing.T) {
	rows := []struct {
		at                               time.Duration
		cost                             string
		allowed, remaining, retry, reset int64
	}{
		{0, "6", 0, 5, -1, 0},
		{0, "1", 1, 4, 0, 1000},
		{0, "1", 1, 3, 0, 2000},
		{0, "1", 1, 2, 0, 3000},
		{0, "1", 1, 1, 0, 4000},
		{0, "1", 1, 0, 0, 5000},
		{0, "1", 0, 0, 1000, 5000},
		{3000 * time.Millisecond, "1", 1, 2, 0, 3000},
		{3100 * time.Millisecond, "1", 1, 1, 0, 3900},
		{4000 * time.Millisecond, "1", 1, 1, 0, 4000},
		{8000 * time.Millisecond, "1", 1, 4, 0, 1000},
		{9500 * time.Millisecond, "1", 1, 4, 0, 1000},
		{9500 * time.Millisecond, "0", 1, 4, 0, 1000},
		{9500 * time.Millisecond, "2", 1, 2, 0, 3000},
		{9500 * time.Millisecond, "5", 0, 2, 3000, 3000},
		{15000 * time.Millisecond, "6", 0, 5, -1, 0},
	}
	f := newFakeRedis(t)
	start := f.now
	for i, r := range rows {
		f.advance(start.Add(r.at).Sub(f.now))
		got := f.mustEval(GCRA, "vectors", "1", "1000", "5", r.cost)
		want := []int64{r.allowed, r.remaining, r.retry, r.reset, 5, 1}
		if !equalInts(got, want) {
			t.Errorf("row %d (t=%v cost %s): got %v, want %v", i, r.at, r.cost, got, want)
		}
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
