package redisrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/scripts"
)

// needV3Mode skips a test of mode on scripts that predate contract v3,
// which refuse it ("ERR invalid mode"). It skips only while the embedded
// scripts do not know the mode "upto": once the v3 scripts are in, every
// such test runs.
func needV3Mode(t *testing.T, mode string) {
	t.Helper()
	s, ok := scripts.Lookup(GCRA.String())
	if !ok {
		t.Fatal("no gcra script")
	}
	if !strings.Contains(s.Source, "upto") {
		t.Skipf("scripts before v3 refuse mode %s", mode)
	}
}

// TestDecodeUnits: field 7 is the units of a v3 reply; a six-field reply
// (scripts before v3, which know only allow, check and peek) means the
// cost when admitted, else 0; fields after the seventh are ignored.
func TestDecodeUnits(t *testing.T) {
	lim := PerSecond(10)
	for _, c := range []struct {
		name  string
		cost  int64
		reply answer
		want  int64
	}{
		{"v2 admitted", 3, answer{ints: []int64{1, 7, 0, 300, 10, 1}}, 3},
		{"v2 denied", 3, answer{ints: []int64{0, 2, 100, 800, 10, 1}}, 0},
		{"v2 peek", 0, answer{ints: []int64{1, 10, 0, 0, 10, 1}}, 0},
		{"v3 up-to", 5, answer{ints: []int64{1, 0, 0, 1000, 10, 1, 2}}, 2},
		{"v3 force denied", 4, answer{ints: []int64{0, 0, 0, 1400, 10, 1, 4}}, 4},
		{"later fields", 5, answer{ints: []int64{1, 0, 0, 1000, 10, 1, 2, 99}}, 2},
		{"v3 as []any", 5, answer{other: []any{int64(1), int64(0), int64(0), int64(1000), int64(10), int64(1), int64(2), "later"}}, 2},
		{"v2 as []any", 5, answer{other: []any{int64(1), int64(5), int64(0), int64(500), int64(10), int64(1)}}, 5},
	} {
		o := oneKey(KindAllow, "k", lim, c.cost)
		res, err := o.decode(c.reply)
		if err != nil || res.Units != c.want {
			t.Errorf("%s: Units %d, %v; want %d", c.name, res.Units, err, c.want)
		}
	}
	o := oneKey(KindAllow, "k", lim, 1)
	if _, err := o.decode(answer{other: []any{int64(1), int64(0), int64(0), int64(0), int64(1), int64(1), "x"}}); !errors.Is(err, ErrBadReply) {
		t.Errorf("a field 7 that is no integer: %v, want ErrBadReply", err)
	}
}

// TestDecideSendsTheMode: each kind goes as CONTRACT.md's mode, ARGV[5],
// through the same plan and send; a peek is cost 0 with no mode.
func TestDecideSendsTheMode(t *testing.T) {
	lim := []Limit{PerMinute(10)}
	f, log := newFakeRedis(t), &argLog{}
	l := testLimiter(f.rdb)
	f.rdb.AddHook(log)
	ctx := context.Background()
	for _, c := range []struct {
		kind Kind
		n    int64
		want string // the ARGV after the key
	}{
		{KindAllow, 0, "10 60000"},
		{KindCheck, 2, "10 60000  2 check"},
		{KindPeek, 0, "10 60000  0"},
		{KindUpTo, 5, "10 60000  5 upto"},
		{KindRefund, 1, "10 60000   refund"},
		{KindForce, 3, "10 60000  3 force"},
		{KindWait, 0, "10 60000"},
	} {
		log.take()
		_, _ = l.Decide(ctx, Request{Kind: c.kind, Key: "k", Limits: lim, N: c.n})
		sent := log.take()
		if len(sent) == 0 || !strings.HasSuffix(sent[len(sent)-1], " k "+c.want) {
			t.Errorf("%v: sent %q, want ARGV %q", c.kind, sent, c.want)
		}
	}
}

// TestDecideRefusesBadRequests: a kind no request has, the kinds that
// cannot be batched, and a cost of 0 where it would mean "do not limit"
// (AllowN, WaitN) or nothing (a refund, a penalty) are refused before any
// round trip, pointing to what to ask instead. (A Request's N of 0 means 1
// for the kinds that take: TestRequestZeroNTakesOne.)
func TestDecideRefusesBadRequests(t *testing.T) {
	f, log := newFakeRedis(t), &cmdLog{}
	l := testLimiter(f.rdb)
	f.rdb.AddHook(log)
	ctx, lim := context.Background(), []Limit{PerMinute(10)}
	for _, c := range []struct {
		name string
		call func() (Result, error)
		want string
	}{
		{"kind past KindForce", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindForce + 2, Key: "k", Limits: lim}) }, "invalid kind 8"},
		{"unknown kind", func() (Result, error) { return l.Decide(ctx, Request{Kind: 42, Key: "k", Limits: lim}) }, "invalid kind 42"},
		{"peek with a cost", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: lim, N: 1}) }, "a peek takes nothing"},
		{"wait in a batch", func() (Result, error) { return batchOne(ctx, l, Request{Kind: KindWait, Key: "k", Limits: lim}) }, "cannot be batched"},
		{"reset in a batch", func() (Result, error) { return batchOne(ctx, l, Request{Kind: kindReset, Key: "k", Limits: lim}) }, "invalid kind 7"},
		{"AllowN 0", func() (Result, error) { return l.AllowN(ctx, "k", lim[0], 0) }, "ask with KindPeek"},
		{"WaitN 0", func() (Result, error) { return l.WaitN(ctx, "k", lim[0], 0) }, "ask with KindPeek"},
		{"refund of 0", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindRefund, Key: "k", Limits: lim}) }, "invalid cost '0'"},
		{"force of 0", func() (Result, error) {
			return l.Decide(ctx, Request{Kind: KindForce, Keys: []KeyLimit{{"a", lim[0]}, {"b", lim[0]}}})
		}, "invalid cost '0'"},
		{"AllowN -1", func() (Result, error) { return l.AllowN(ctx, "k", lim[0], -1) }, "invalid cost '-1': must be a whole number from 1 to 10^15"},
		// Issue 38, finding 11: the words said "from 0", though 0 is refused too.
		{"refund of -1", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindRefund, Key: "k", Limits: lim, N: -1}) }, "invalid cost '-1': must be a whole number from 1 to 10^15 for kind refund"},
		{"force of -1", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindForce, Key: "k", Limits: lim, N: -1}) }, "invalid cost '-1': must be a whole number from 1 to 10^15 for kind force"},
		// Issue 38, finding 5: Decide reset the key; the engine's reset kind
		// is no request's.
		{"reset by Decide", func() (Result, error) { return l.Decide(ctx, Request{Kind: kindReset, Key: "k"}) }, "invalid kind 7: must be a request's kind, KindAllow to KindForce (Limiter.Reset resets a key)"},
		{"reset by Decide with limits", func() (Result, error) { return l.Decide(ctx, Request{Kind: kindReset, Key: "k", Limits: lim}) }, "invalid kind 7"},
	} {
		r, err := c.call()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || r != (Result{}) {
			t.Errorf("%s: %+v %v, want ErrInvalid saying %q", c.name, r, err, c.want)
		}
	}
	if cmds := log.take(); len(cmds) != 0 {
		t.Errorf("refused requests sent %v", cmds)
	}
	if _, err := Args(kindReset, 1, lim...); !errors.Is(err, ErrInvalid) {
		t.Errorf("Args of a reset: %v, want ErrInvalid", err)
	}
}

// TestDecideWaitsForSeveralLimits: KindWait is Wait for a whole Request,
// here two limits: it sleeps until both admit, as WaitN would.
func TestDecideWaitsForSeveralLimits(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	ctx := context.Background()
	r := Request{Kind: KindWait, Key: "k", Limits: []Limit{PerSecond(2), PerMinute(3)}}
	for i := range 3 {
		res, err := l.Decide(ctx, r)
		if err != nil || !res.Allowed || res.Units != 1 {
			t.Fatalf("wait %d: %+v %v, want admitted, 1 unit", i, res, err)
		}
	}
	if len(c.sleeps) != 1 {
		t.Errorf("slept %v for the third unit of 2/s, want one sleep", c.sleeps)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if res, err := l.Decide(short, r); !errors.Is(err, context.DeadlineExceeded) || res.Allowed || res.Binding != 1 {
		t.Errorf("a fourth within 1s of 3/min: %+v %v, want the minute's limit past the deadline", res, err)
	}
}

// TestDecideUpToAndRefund: an up-to request takes what every limit
// admits, at most N, and says how much; a grant of 0 is a denial with the
// wait for one. A refund gives units back (never past full), and drops
// this Limiter's cached denials of the key, which are now too long.
func TestDecideUpToAndRefund(t *testing.T) {
	needV3Mode(t, "upto")
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiterOn(newRedisClock(f), f.rdb, WithDenyCache(10))
			lim := []Limit{PerHour(5).WithAlgorithm(a)}
			step := func(what string, r Request, allowed bool, units, remaining int64) Result {
				t.Helper()
				r.Key, r.Limits = "k", lim
				res, err := l.Decide(ctx, r)
				if err != nil || res.Allowed != allowed || res.Units != units || res.Remaining != remaining || res.Source != SourceRedis {
					t.Fatalf("%s: %+v (units %d) %v; want allowed %v, %d units, %d left, by Redis", what, res, res.Units, err, allowed, units, remaining)
				}
				return res
			}
			step("take 3 of 5", Request{N: 3}, true, 3, 2)
			step("up to 4 of 2 left", Request{Kind: KindUpTo, N: 4}, true, 2, 0)
			if res := step("up to 4 of none left", Request{Kind: KindUpTo, N: 4}, false, 0, 0); res.RetryAfter <= 0 || res.Never() {
				t.Fatalf("up to 4 of none left: wait %v, want the wait for one", res.RetryAfter)
			}
			step("take 2 of none (a denial the deny cache keeps)", Request{N: 2}, false, 0, 0)
			step("refund 3", Request{Kind: KindRefund, N: 3}, true, 3, 3)
			step("take 2 after the refund: Redis, not the cached denial", Request{N: 2}, true, 2, 1)
			step("refund 10 with 1 of 5 left: full", Request{Kind: KindRefund, N: 10}, true, 4, 5)
		})
	}
}

// TestDecideForce: force records what already happened, whatever the
// limits say, on every key of the request, and later calls wait for it.
func TestDecideForce(t *testing.T) {
	needV3Mode(t, "force")
	ctx := context.Background()
	l := testLimiter(newFakeRedis(t).rdb)
	user, org := PerHour(5), PerHour(20)
	keys := []KeyLimit{{Key: "{o}:u", Limit: user}, {Key: "{o}", Limit: org}}
	if r, err := l.Decide(ctx, Request{Keys: keys, N: 3}); err != nil || !r.Allowed {
		t.Fatalf("take 3: %+v %v", r, err)
	}
	res, err := l.Decide(ctx, Request{Kind: KindForce, Keys: keys, N: 4})
	if err != nil || res.Allowed || res.Units != 4 || res.Key != "{o}:u" || res.Remaining != 0 {
		t.Fatalf("force 4 with 2 left: %+v %v, want 4 recorded on the user's key, which allow would have denied", res, err)
	}
	if r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "{o}", Limits: []Limit{org}}); err != nil || r.Remaining != 13 {
		t.Errorf("the organisation after 3 and a penalty of 4: %+v %v, want 13 left", r, err)
	}
	if r, err := l.Allow(ctx, "{o}:u", user); err != nil || r.Allowed {
		t.Errorf("the user in debt: %+v %v, want denied", r, err)
	}
}
