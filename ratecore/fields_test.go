package ratecore

import (
	"math"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
)

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		limit redisrate.Limit
		q, w  int64
	}{
		{redisrate.PerSecond(10), 10, 1},
		{redisrate.PerSecond(10).WithBurst(20), 20, 2},
		{redisrate.PerSecond(10).WithBurst(25), 10, 1},    // 2.5 s to refill: by the rate
		{redisrate.Per(5, 250*time.Millisecond), 20, 1},   // 5 per 250 ms is 20 per second
		{redisrate.Per(10, 100*time.Millisecond), 100, 1}, // not q=10;w=1
		{redisrate.Per(3, 700*time.Millisecond), 30, 7},   // 7 s hold 10 periods
		{redisrate.Per(5, 1500*time.Millisecond), 10, 3},  //
		{redisrate.PerHour(7).WithBurst(2), 7, 3600},      // 2 refill in 1028.57 s
		{redisrate.PerHour(7), 7, 3600},                   //
		{redisrate.PerDay(1000).WithAlgorithm(redisrate.FixedWindow), 1000, 86400},
		{redisrate.PerMinute(100).WithAlgorithm(redisrate.SlidingWindow), 100, 60},
		{redisrate.Per(10, 100*time.Millisecond).WithAlgorithm(redisrate.SlidingLog), 100, 1},
		{redisrate.PerSecond(10).WithBurst(30).WithAlgorithm(redisrate.TokenBucket), 30, 3},
		{redisrate.PerSecond(10).WithBurst(25).WithAlgorithm(redisrate.TokenBucket), 10, 1}, // not 25 in 3 s: by the rate
		{redisrate.Per(1e15, 1e12*time.Millisecond), 1e15, 1e9},
		// Calendar windows: their average length, not the Period of 0.
		{redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 100000, Calendar: "day America/Los_Angeles"}, 100000, 86400},
		{redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 5000, Calendar: "week"}, 5000, 604800},
		{redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 1e9, Calendar: "month UTC"}, 1e9, 2629746},
	} {
		q, w := window(tc.limit)
		if q != tc.q || w != tc.w {
			t.Errorf("%v: q=%d;w=%d; want q=%d;w=%d", tc.limit, q, w, tc.q, tc.w)
		}
	}
}

// t is the time until more quota comes: one unit for the continuous
// buckets, the next refill for the token bucket, full for windows.
func TestNext(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		limit redisrate.Limit
		res   redisrate.Result
		want  time.Duration // 0: no t
	}{
		{"gcra full", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 3, Capacity: 3}, 0},
		{"gcra one used", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 2, Capacity: 3, ResetAfter: 20000 * ms}, 20000 * ms},
		{"gcra three used", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 0, Capacity: 3, ResetAfter: 60000 * ms}, 20000 * ms},
		{"gcra part drained", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 1, Capacity: 3, ResetAfter: 35000 * ms}, 15000 * ms},
		{"leaky", redisrate.PerSecond(10).WithAlgorithm(redisrate.LeakyBucket), redisrate.Result{Allowed: true, Remaining: 5, Capacity: 10, ResetAfter: 450 * ms}, 50 * ms},
		{"token bucket next refill", redisrate.PerSecond(10).WithBurst(30).WithAlgorithm(redisrate.TokenBucket),
			redisrate.Result{Allowed: true, Remaining: 5, Capacity: 30, ResetAfter: 2300 * ms}, 300 * ms},
		{"token bucket one refill away", redisrate.PerSecond(10).WithAlgorithm(redisrate.TokenBucket),
			redisrate.Result{Allowed: true, Remaining: 9, Capacity: 10, ResetAfter: 700 * ms}, 700 * ms},
		{"fixed window", redisrate.PerMinute(10).WithAlgorithm(redisrate.FixedWindow),
			redisrate.Result{Allowed: true, Remaining: 5, Capacity: 10, ResetAfter: 42000 * ms}, 42000 * ms},
		{"denied: not past Retry-After", redisrate.PerMinute(10).WithAlgorithm(redisrate.SlidingWindow),
			redisrate.Result{Remaining: 0, Capacity: 10, RetryAfter: 3000 * ms, ResetAfter: 90000 * ms}, 3000 * ms},
		{"never", redisrate.PerMinute(3), redisrate.Result{Remaining: 3, Capacity: 3, RetryAfter: math.MaxInt64}, 0},
	} {
		got, ok := next(tc.limit, tc.res)
		if !ok {
			got = 0
		}
		if got != tc.want {
			t.Errorf("%s: next = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

func TestFieldSet(t *testing.T) {
	limits := []redisrate.Limit{redisrate.PerSecond(2), redisrate.PerMinute(3).WithName("x")}
	s, err := newFieldSet([]string{"a", `b"`}, limits)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.policy, `"a";q=2;w=1, "b\"";q=3;w=60`; got != want {
		t.Errorf("policy = %s; want %s", got, want)
	}
	if got, want := s.rateLimit(redisrate.Result{Allowed: true, Binding: 1, Remaining: 1, Capacity: 3, ResetAfter: 40 * time.Second}), `"b\"";r=1;t=20`; got != want {
		t.Errorf("rateLimit = %s; want %s", got, want)
	}
	if s.name(1) != `b"` || s.limits[1].Name != `b"` {
		t.Errorf("name(1) = %q, the limit's Name %q; want both b\"", s.name(1), s.limits[1].Name)
	}
	if limits[1].Name != "x" {
		t.Errorf("newFieldSet named the caller's limit: %q", limits[1].Name)
	}
	for _, names := range [][]string{{"a"}, {"a", "a"}, {"a", ""}, {"a", "\x7f"}} {
		if _, err := newFieldSet(names, []redisrate.Limit{redisrate.PerSecond(2), redisrate.PerMinute(3)}); err == nil {
			t.Errorf("newFieldSet(%q) accepted", names)
		}
	}
	if c := ceilSeconds(time.Second + 1); c != 2 {
		t.Errorf("ceilSeconds(1s+1ns) = %d", c)
	}
}

// The zero fieldSet has no limits and names none: its fields are empty,
// and no method panics, nor name out of range.
func TestZeroFieldSet(t *testing.T) {
	var s fieldSet
	res := redisrate.Result{Allowed: true, Remaining: 1, Capacity: 2, ResetAfter: time.Second}
	if s.policy != "" || s.rateLimit(res) != "" || s.name(0) != "" {
		t.Errorf("zero fieldSet: policy %q, rateLimit %q, name(0) %q; want all empty", s.policy, s.rateLimit(res), s.name(0))
	}
	one, err := newFieldSet([]string{"a"}, []redisrate.Limit{redisrate.PerSecond(2)})
	if err != nil {
		t.Fatal(err)
	}
	if one.name(-1) != "" || one.name(1) != "" {
		t.Errorf("name out of range: %q, %q; want empty", one.name(-1), one.name(1))
	}
}
