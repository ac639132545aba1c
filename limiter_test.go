package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cmdLog is a go-redis hook that records the name of every command sent.
type cmdLog struct {
	mu   sync.Mutex
	cmds []string
}

func (h *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.cmds = append(h.cmds, strings.ToUpper(cmd.Name()))
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (h *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *cmdLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.cmds
	h.cmds = nil
	return out
}

// TestLimiterDecodesReplies: every call decodes the script's reply into the
// Result it stands for, for every algorithm.
func TestLimiterDecodesReplies(t *testing.T) {
	ctx := context.Background()
	for a := Algorithm(0); a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := NewLimiter(f.rdb)
			lim := PerSecond(4).WithAlgorithm(a)
			r, err := l.Allow(ctx, "k", lim)
			if err != nil {
				t.Fatal(err)
			}
			raw := f.mustEval(a, "raw", "4", "1000", "", "1", "")
			want := Result{Allowed: true, Remaining: 3, ResetAfter: time.Duration(raw[3]) * time.Millisecond, Capacity: 4, Binding: 0, Limit: lim}
			if r != want {
				t.Errorf("Allow: %+v, want %+v", r, want)
			}
			if r, err = l.AllowN(ctx, "k", lim, 3); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Errorf("AllowN 3: %+v %v, want admitted with 0 left", r, err)
			}
			f.mustEval(a, "raw", "4", "1000", "", "3", "")
			r, err = l.Check(ctx, "k", lim)
			raw = f.mustEval(a, "raw", "4", "1000", "", "1", "check")
			want = Result{Allowed: false, Remaining: 0, RetryAfter: time.Duration(raw[2]) * time.Millisecond,
				ResetAfter: time.Duration(raw[3]) * time.Millisecond, Capacity: 4, Limit: lim}
			if err != nil || r != want || r.RetryAfter <= 0 || r.Never() {
				t.Errorf("Check: %+v %v, want %+v (retry later, not never)", r, err, want)
			}
			if r, err = l.CheckN(ctx, "k", lim, 5); err != nil || r.Allowed || !r.Never() || r.RetryAfter != Never {
				t.Errorf("CheckN 5 of 4: %+v %v, want Never", r, err)
			}
			if r, err = l.AllowN(ctx, "k", lim, 0); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Errorf("AllowN 0: %+v %v, want admitted, 0 left", r, err)
			}
			if got := f.dump("k"); got != f.dump("raw") {
				t.Errorf("state %s, want the raw calls' %s", got, f.dump("raw"))
			}
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if f.rdb.Exists(ctx, "k").Val() != 0 {
				t.Errorf("Reset left the key")
			}
			if r, _ = l.Check(ctx, "k", lim); !r.Allowed || r.Remaining != 3 {
				t.Errorf("Check after Reset: %+v, want full", r)
			}
		})
	}
}

func TestLimiterMulti(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := NewLimiter(f.rdb)
	perSec, perMin := PerSecond(10), PerMinute(3)
	for i := int64(1); i <= 3; i++ {
		r, err := l.AllowMulti(ctx, "k", 1, perSec, perMin)
		if err != nil || !r.Allowed || r.Binding != 1 || r.Limit != perMin || r.Remaining != 3-i || r.Capacity != 3 {
			t.Fatalf("call %d: %+v %v, want admitted, bound by 3/min", i, r, err)
		}
	}
	before := f.dump("k")
	r, err := l.AllowMulti(ctx, "k", 1, perSec, perMin)
	if err != nil || r.Allowed || r.Binding != 1 || r.RetryAfter != 20*time.Second {
		t.Errorf("4th: %+v %v, want denied by 3/min, retry in 20s", r, err)
	}
	if r, err = l.CheckMulti(ctx, "k", 0, perSec, perMin); err != nil || !r.Allowed || r.Binding != 1 {
		t.Errorf("CheckMulti: %+v %v", r, err)
	}
	if f.dump("k") != before {
		t.Errorf("a denial and a check wrote %s over %s", f.dump("k"), before)
	}
	if _, err := l.AllowMulti(ctx, "k", 1, perSec, perMin.WithAlgorithm(TokenBucket)); !errors.Is(err, ErrInvalid) {
		t.Errorf("limits of two algorithms: %v, want ErrInvalid", err)
	}
	if _, err := l.AllowMulti(ctx, "k", 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("no limits: %v, want ErrInvalid", err)
	}
	nine := make([]Limit, 9)
	for i := range nine {
		nine[i] = PerSecond(float64(i + 1))
	}
	if _, err := l.AllowMulti(ctx, "k", 1, nine...); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "too many limits (9): must be at most 8") {
		t.Errorf("nine limits: %v, want the scripts' too many limits error", err)
	}
	if f.dump("k") != before {
		t.Errorf("refused calls wrote")
	}
}

func TestLimiterKeyPrefix(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := NewLimiter(f.rdb, WithKeyPrefix("rate:"))
	if _, err := l.Allow(ctx, "user:7", PerSecond(5)); err != nil {
		t.Fatal(err)
	}
	if keys := f.rdb.Keys(ctx, "*").Val(); len(keys) != 1 || keys[0] != "rate:user:7" {
		t.Errorf("keys %v, want [rate:user:7]", keys)
	}
	f.rdb.Set(ctx, "rate:order", "order 42", 0)
	_, err := l.Allow(ctx, "order", PerSecond(5))
	var e *Error
	if !errors.As(err, &e) || e.Key != "rate:order" || e.Script != "gcra" || !errors.Is(err, ErrForeignKey) {
		t.Errorf("foreign key: %v, want *Error for gcra on rate:order matching ErrForeignKey", err)
	}
	if !strings.Contains(err.Error(), `"rate:order"`) {
		t.Errorf("error %q does not name the key", err)
	}
	if err := l.Reset(ctx, "user:7"); err != nil || f.rdb.Exists(ctx, "rate:user:7").Val() != 0 {
		t.Errorf("Reset with a prefix: %v", err)
	}
}

// TestLimiterForeignKeys: every algorithm refuses a key that is not its
// state with ErrForeignKey and leaves it as it was.
func TestLimiterForeignKeys(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := NewLimiter(f.rdb)
	f.rdb.RPush(ctx, "list", "a")
	f.rdb.Set(ctx, "str", "order 42", time.Hour)
	for a := Algorithm(0); a < numAlgorithms; a++ {
		other := (a + 1) % numAlgorithms
		okey := "state-of-" + other.String()
		if _, err := l.Allow(ctx, okey, PerSecond(5).WithAlgorithm(other)); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"list", "str", okey} {
			before := f.dump(k)
			for _, check := range []bool{false, true} {
				var err error
				if check {
					_, err = l.Check(ctx, k, PerSecond(5).WithAlgorithm(a))
				} else {
					_, err = l.Allow(ctx, k, PerSecond(5).WithAlgorithm(a))
				}
				if !errors.Is(err, ErrForeignKey) || errors.Is(err, ErrInvalid) {
					t.Errorf("%s on %s (check %v): %v, want ErrForeignKey", a, k, check, err)
				}
				var rerr redis.Error
				if !errors.As(err, &rerr) {
					t.Errorf("%s on %s: %v does not unwrap to the server's error", a, k, err)
				}
			}
			if after := f.dump(k); after != before {
				t.Errorf("%s changed %s: %s -> %s", a, k, before, after)
			}
		}
	}
}

// badLimits are limits the scripts refuse, one per rule.
func badLimits() []Limit {
	ms := time.Millisecond
	return []Limit{
		{Rate: 0, Period: time.Second},
		{Rate: -1, Period: time.Second},
		{Rate: math.NaN(), Period: time.Second},
		{Rate: math.Inf(1), Period: time.Second},
		{Rate: 1e16, Period: time.Second},
		{Rate: 1.5, Period: time.Second, Algorithm: FixedWindow},
		{Rate: 2.5, Period: time.Second, Algorithm: SlidingLog},
		{Rate: 10, Period: 0},
		{Rate: 10, Period: -time.Second},
		{Rate: 10, Period: 1500 * time.Microsecond},
		{Rate: 10, Period: 2e12 * ms},
		{Rate: 10, Period: time.Second, Burst: -1},
		{Rate: 10, Period: time.Second, Burst: math.NaN()},
		{Rate: 10, Period: time.Second, Burst: 1e16},
		{Rate: 10, Period: time.Second, Burst: 5, Algorithm: SlidingWindow},
		{Rate: 10, Period: time.Second, Burst: 11, Algorithm: FixedWindow},
		{Rate: 10, Period: time.Second, Burst: 10.5, Algorithm: SlidingLog},
		{Rate: 7, Period: 1e12 * ms, Burst: 10},
		{Rate: 7, Period: 1e12 * ms, Burst: 10, Algorithm: LeakyBucket},
		{Rate: 1, Period: 1e12 * ms, Burst: 1e15, Algorithm: TokenBucket},
		{Rate: 1e15, Period: 1e12 * ms, Algorithm: SlidingWindow},
	}
}

// scriptArgs formats l as any client would, without validating it.
func scriptArgs(l Limit, cost float64) []any {
	period := fmt.Sprint(int64(l.Period / time.Millisecond))
	if l.Period%time.Millisecond != 0 {
		period = fmt.Sprint(float64(l.Period) / float64(time.Millisecond))
	}
	burst := ""
	if l.Burst != 0 {
		burst = formatNumber(l.Burst)
	}
	return []any{formatNumber(l.Rate), period, burst, formatNumber(cost), ""}
}

// TestValidateWordsAsScripts: Limit.Validate refuses what the scripts refuse,
// with the same message ("redisrate: " for "ERR "), before any round trip.
func TestValidateWordsAsScripts(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	log := &cmdLog{}
	f.rdb.AddHook(log)
	l := NewLimiter(f.rdb)
	for _, lim := range badLimits() {
		verr := lim.Validate()
		_, serr := f.eval(lim.Algorithm, "k", scriptArgs(lim, 1)...)
		if verr == nil || serr == nil {
			t.Errorf("%+v: Validate %v, script %v: want both to refuse", lim, verr, serr)
			continue
		}
		if !errors.Is(verr, ErrInvalid) {
			t.Errorf("%+v: %v does not match ErrInvalid", lim, verr)
		}
		if got, want := strings.TrimPrefix(verr.Error(), "redisrate: "), strings.TrimPrefix(serr.Error(), "ERR "); got != want {
			t.Errorf("%+v:\n  Validate %q\n  script   %q", lim, got, want)
		}
		log.take()
		if _, err := l.Allow(ctx, "k", lim); !errors.Is(err, ErrInvalid) || err.Error() != verr.Error() {
			t.Errorf("%+v: Allow %v, want %v", lim, err, verr)
		}
		if cmds := log.take(); len(cmds) != 0 {
			t.Errorf("%+v: Allow sent %v, want no round trip", lim, cmds)
		}
	}
	// costs
	for _, c := range []struct {
		a    Algorithm
		cost float64
	}{{GCRA, -1}, {GCRA, math.NaN()}, {GCRA, math.Inf(1)}, {TokenBucket, 1e16}, {FixedWindow, 1.5}, {SlidingLog, 0.5}} {
		lim := PerSecond(10).WithAlgorithm(c.a)
		_, serr := f.eval(c.a, "k", scriptArgs(lim, c.cost)...)
		_, aerr := l.AllowN(ctx, "k", lim, c.cost)
		if serr == nil || aerr == nil || !errors.Is(aerr, ErrInvalid) {
			t.Errorf("%s cost %v: AllowN %v, script %v: want both to refuse", c.a, c.cost, aerr, serr)
			continue
		}
		if got, want := strings.TrimPrefix(aerr.Error(), "redisrate: "), strings.TrimPrefix(serr.Error(), "ERR "); got != want {
			t.Errorf("%s cost %v:\n  AllowN %q\n  script %q", c.a, c.cost, got, want)
		}
	}
	// a second limit is named as the scripts name it
	bad := Limit{Rate: 10, Period: 0}
	_, aerr := l.AllowMulti(ctx, "k", 1, PerSecond(1), bad)
	args := append(scriptArgs(PerSecond(1), 1), "10", "0", "")
	_, serr := f.eval(GCRA, "k", args...)
	if aerr == nil || serr == nil || strings.TrimPrefix(aerr.Error(), "redisrate: ") != strings.TrimPrefix(serr.Error(), "ERR ") {
		t.Errorf("limit #2: AllowMulti %v, script %v: want the same words", aerr, serr)
	}
	if f.rdb.Exists(ctx, "k").Val() != 0 {
		t.Errorf("refused calls created the key")
	}
	for _, good := range []Limit{PerSecond(3), PerMinute(7), PerHour(1), PerDay(1e6), Per(2.5, 250*time.Millisecond).WithBurst(4), PerSecond(10).WithBurst(10).WithAlgorithm(SlidingWindow)} {
		if err := good.Validate(); err != nil {
			t.Errorf("%v: %v", good, err)
		}
	}
}

func TestClassifyScriptErrors(t *testing.T) {
	for msg, want := range map[string]error{
		"ERR invalid limit '0': must be a positive number, at most 1e15":   ErrInvalid,
		"ERR incomplete limit #2: each further limit is the triple":        ErrInvalid,
		"ERR too many limits (9): must be at most 8":                       ErrInvalid,
		"ERR key holds a value that is not gcra state: left untouched":     ErrForeignKey,
		"ERR key holds token_bucket state, not gcra state: left untouched": ErrForeignKey,
		"LOADING Redis is loading the dataset in memory":                   nil,
	} {
		if got := classify(errors.New(msg)); got != want {
			t.Errorf("classify(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestNoScriptHeals: after SCRIPT FLUSH the next call falls back to EVAL,
// which loads the script again, and the call after is an EVALSHA again.
func TestNoScriptHeals(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	log := &cmdLog{}
	f.rdb.AddHook(log)
	for _, ro := range []bool{false, true} {
		opts := []Option{}
		if ro {
			opts = append(opts, WithReadOnlyCheck())
		}
		l := NewLimiter(f.rdb, opts...)
		call := func() (Result, error) {
			if ro {
				return l.Check(ctx, "k", PerSecond(5))
			}
			return l.Allow(ctx, "k", PerSecond(5))
		}
		if err := f.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		log.take()
		r, err := call()
		want := "[EVALSHA EVAL]"
		if ro {
			want = "[EVALSHA_RO EVAL_RO]"
		}
		if got := fmt.Sprint(log.take()); got != want {
			t.Errorf("read-only %v: sent %s, want %s", ro, got, want)
		}
		if ro {
			// miniredis counts TIME as a write command, so it refuses the
			// scripts under EVAL_RO; Redis does not (integration_test/ runs
			// them there). The fallback itself is what is shown here.
			if err == nil || !strings.Contains(err.Error(), "read-only scripts") {
				t.Errorf("read-only: %+v %v: want miniredis's read-only refusal of TIME", r, err)
			}
			continue
		}
		if err != nil || !r.Allowed {
			t.Fatalf("first call after SCRIPT FLUSH: %+v %v", r, err)
		}
		if _, err := call(); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(log.take()); got != "[EVALSHA]" {
			t.Errorf("then sent %s, want EVALSHA alone: EVAL should have loaded the script", got)
		}
	}
	for _, msg := range []string{"NOSCRIPT No matching script", "proxy: upstream said NOSCRIPT No matching script. Use EVAL."} {
		if !isNoScript(errors.New(msg)) {
			t.Errorf("isNoScript(%q) = false", msg)
		}
	}
	if isNoScript(errors.New("ERR invalid limit")) {
		t.Errorf("isNoScript matched another error")
	}
}

func TestZeroLimiter(t *testing.T) {
	ctx := context.Background()
	var zero Limiter
	var nilL *Limiter
	for _, l := range []*Limiter{&zero, nilL, NewLimiter(nil)} {
		if _, err := l.Allow(ctx, "k", PerSecond(1)); !errors.Is(err, ErrNoClient) {
			t.Errorf("Allow: %v, want ErrNoClient", err)
		}
		if _, err := l.CheckMulti(ctx, "k", 1, PerSecond(1)); !errors.Is(err, ErrNoClient) {
			t.Errorf("CheckMulti: %v, want ErrNoClient", err)
		}
		if err := l.Reset(ctx, "k"); !errors.Is(err, ErrNoClient) {
			t.Errorf("Reset: %v, want ErrNoClient", err)
		}
	}
}

func TestParseLimitRoundTrip(t *testing.T) {
	for _, l := range []Limit{
		PerSecond(10), PerMinute(100), PerHour(1), PerDay(5000), Per(5, 250*time.Millisecond),
		Per(3, 90*time.Minute), Per(2, 48*time.Hour), Per(1000, 10*time.Second),
		PerSecond(2.5).WithBurst(4), PerSecond(10).WithBurst(20).WithAlgorithm(TokenBucket),
		PerMinute(7).WithAlgorithm(SlidingWindow), PerHour(3).WithAlgorithm(SlidingLog),
		PerSecond(0.25).WithAlgorithm(LeakyBucket), Per(1, 1500*time.Millisecond).WithAlgorithm(FixedWindow),
		PerSecond(1e15), Per(1, 1e12*time.Millisecond),
	} {
		s := l.String()
		got, err := ParseLimit(s)
		if err != nil || got != l {
			t.Errorf("%+v -> %q -> %+v, %v", l, s, got, err)
		}
	}
	for s, want := range map[string]Limit{
		"10/s":                          PerSecond(10),
		"100/minute":                    PerMinute(100),
		"5/250ms burst 10 token_bucket": Per(5, 250*time.Millisecond).WithBurst(10).WithAlgorithm(TokenBucket),
		"sliding-window 3/h":            {},
		"3/1h30m":                       Per(3, 90*time.Minute),
		"2/2d":                          Per(2, 48*time.Hour),
		"1e3/day burst 2e3":             PerDay(1000).WithBurst(2000),
	} {
		got, err := ParseLimit(s)
		if want == (Limit{}) {
			if err == nil {
				t.Errorf("ParseLimit(%q) = %+v, want an error (the rate comes first)", s, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "10", "x/s", "10/fortnight", "10/s burst", "10/s burst x", "10/s foo", "/s", "10/"} {
		if _, err := ParseLimit(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLimit(%q): %v, want ErrInvalid", s, err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for a := Algorithm(0); a < numAlgorithms; a++ {
		for _, s := range []string{a.String(), strings.ToUpper(a.String()), strings.ReplaceAll(a.String(), "_", "-"), " " + a.String() + " "} {
			if got, err := ParseAlgorithm(s); err != nil || got != a {
				t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", s, got, err, a)
			}
		}
		s, err := a.Script()
		if err != nil || s.Name != a.String() || s.Algorithm != a || Scripts()[a] != s {
			t.Errorf("%v.Script() = %+v, %v", a, s.Name, err)
		}
	}
	for _, s := range []string{"", "leaky", "token bucket", "gcra2"} {
		if _, err := ParseAlgorithm(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAlgorithm(%q): %v, want ErrInvalid", s, err)
		}
	}
	if _, err := Algorithm(99).Script(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Algorithm(99).Script(): %v", err)
	}
	if s := Algorithm(99).String(); s != "Algorithm(99)" {
		t.Errorf("Algorithm(99).String() = %q", s)
	}
}

// TestResultNever: only a cost over the capacity is Never.
func TestResultNever(t *testing.T) {
	if (Result{Allowed: false, RetryAfter: Never}).Never() != true ||
		(Result{Allowed: false, RetryAfter: time.Second}).Never() ||
		(Result{Allowed: true}).Never() {
		t.Errorf("Never() is wrong")
	}
	r, err := decodeReply([]any{int64(0), int64(3), int64(-1), int64(0), int64(3), int64(1), int64(99)}, []Limit{PerSecond(3)})
	if err != nil || !r.Never() || r.RetryAfter != Never {
		t.Errorf("decode of -1 with a trailing field: %+v %v", r, err)
	}
	for _, v := range []any{"x", []any{int64(1)}, []any{int64(1), int64(1), int64(0), int64(0), "3", int64(1)}, []any{int64(1), int64(1), int64(0), int64(0), int64(3), int64(2)}} {
		if _, err := decodeReply(v, []Limit{PerSecond(3)}); !errors.Is(err, ErrBadReply) {
			t.Errorf("decode %v: %v, want ErrBadReply", v, err)
		}
	}
}
