package redisrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCallsDecodeReplies: every call method decodes the script's reply into
// the Result it stands for, for every algorithm, and writes what the raw
// script calls write.
func TestCallsDecodeReplies(t *testing.T) {
	ctx := context.Background()
	for a := Algorithm(0); a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiter(f.rdb)
			lim := PerSecond(4).WithAlgorithm(a)
			r, err := l.Allow(ctx, "k", lim)
			if err != nil {
				t.Fatal(err)
			}
			raw := f.mustEval(a, "raw", "4", "1000", "", "1", "")
			want := Result{Allowed: true, Units: 1, Remaining: 3, ResetAfter: time.Duration(raw[3]) * time.Millisecond, Capacity: 4, Binding: 0, Limit: lim, Key: "k"}
			if r != want {
				t.Errorf("Allow: %+v, want %+v", r, want)
			}
			if r, err = l.AllowN(ctx, "k", lim, 3); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Errorf("AllowN 3: %+v %v, want admitted with 0 left", r, err)
			}
			f.mustEval(a, "raw", "4", "1000", "", "3", "")
			r, err = l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}})
			raw = f.mustEval(a, "raw", "4", "1000", "", "1", "check")
			want = Result{Allowed: false, Remaining: 0, RetryAfter: time.Duration(raw[2]) * time.Millisecond,
				ResetAfter: time.Duration(raw[3]) * time.Millisecond, Capacity: 4, Limit: lim, Key: "k"}
			if err != nil || r != want || r.RetryAfter <= 0 || r.Never() {
				t.Errorf("Check: %+v %v, want %+v (retry later, not never)", r, err, want)
			}
			if r, err = l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: 5}); err != nil || r.Allowed || !r.Never() || r.RetryAfter != infDuration {
				t.Errorf("a check of 5 of 4: %+v %v, want never (infDuration)", r, err)
			}
			if r, err = l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}}); err != nil || !r.Allowed || r.Remaining != 0 || r.Capacity != 4 {
				t.Errorf("Peek: %+v %v, want admitted, 0 of 4 left", r, err)
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
			if r, _ = l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}}); !r.Allowed || r.Remaining != 4 {
				t.Errorf("Peek after Reset: %+v, want full", r)
			}
		})
	}
}

// TestRequestZeroNTakesOne: the zero Request.N takes one unit (20 requests
// against 5 per minute: 5 pass), and Peek is asked for by name.
func TestRequestZeroNTakesOne(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb)
	passed := 0
	for range 20 {
		res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerMinute(5)}}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			passed++
		}
	}
	if passed != 5 {
		t.Errorf("%d of 20 zero-N requests passed 5/min, want 5", passed)
	}
	res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerMinute(5)}, Kind: KindPeek}})
	if err != nil || !res[0].Allowed || res[0].Remaining != 0 {
		t.Errorf("Peek request: %+v %v, want the state: 0 left", res, err)
	}
	_, err = l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerMinute(5)}, Kind: KindPeek, N: 2}})
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(be.Errs[0], ErrInvalid) {
		t.Errorf("Peek with N 2: %v, want ErrInvalid", err)
	}
}

func TestMulti(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb)
	perSec, perMin := PerSecond(10), PerMinute(3)
	for i := int64(1); i <= 3; i++ {
		r, err := l.Decide(ctx, Request{Key: "k", Limits: []Limit{perSec, perMin}})
		if err != nil || !r.Allowed || r.Binding != 1 || r.Limit != perMin || r.Remaining != 3-i || r.Capacity != 3 {
			t.Fatalf("call %d: %+v %v, want admitted, bound by 3/min", i, r, err)
		}
	}
	before := f.dump("k")
	r, err := l.Decide(ctx, Request{Key: "k", Limits: []Limit{perSec, perMin}})
	if err != nil || r.Allowed || r.Binding != 1 || r.RetryAfter != 20*time.Second {
		t.Errorf("4th: %+v %v, want denied by 3/min, retry in 20s", r, err)
	}
	if r, err = l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{perSec, perMin}}); err != nil || !r.Allowed || r.Binding != 1 || r.Remaining != 0 {
		t.Errorf("Peek: %+v %v", r, err)
	}
	if r, err = l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{perSec, perMin}}); err != nil || r.Allowed || r.Binding != 1 {
		t.Errorf("a check of two limits: %+v %v", r, err)
	}
	if f.dump("k") != before {
		t.Errorf("a denial, a peek and a check wrote %s over %s", f.dump("k"), before)
	}
	if _, err := l.Decide(ctx, Request{Key: "k", Limits: []Limit{perSec, perMin.WithAlgorithm(TokenBucket)}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("limits of two algorithms: %v, want ErrInvalid", err)
	}
	if _, err := l.Decide(ctx, Request{Key: "k"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no limits: %v, want ErrInvalid", err)
	}
	nine := make([]Limit, 9)
	for i := range nine {
		nine[i] = PerSecond(int64(i + 1))
	}
	if _, err := l.Decide(ctx, Request{Key: "k", Limits: nine}); !errors.Is(err, ErrInvalid) || err.Error() != "redisrate: too many limits (9): must be at most 8" {
		t.Errorf("nine limits: %v, want the scripts' too many limits error", err)
	}
	if f.dump("k") != before {
		t.Errorf("refused calls wrote")
	}
}

// TestOtherLimitsThanLastTime shows what Request's and Allow's docs say:
// state is kept per limit position, so a key called with fewer limits than
// last time loses the others' counts, and one called with its limits in
// another order reads each state in the other limit's terms.
func TestOtherLimitsThanLastTime(t *testing.T) {
	ctx := context.Background()
	for a := Algorithm(0); a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiter(f.rdb)
			perSec, perHour := PerSecond(10).WithAlgorithm(a), PerHour(12).WithAlgorithm(a)
			for range 5 {
				if r, err := l.Decide(ctx, Request{Key: "k", Limits: []Limit{perSec, perHour}}); err != nil || !r.Allowed {
					t.Fatalf("Decide of two limits: %+v %v", r, err)
				}
				f.advance(time.Second) // the per-second limit is full again each time
			}
			r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{perSec, perHour}})
			if err != nil || r.Binding != 1 || r.Remaining != 7 {
				t.Fatalf("after 5 calls: %+v %v, want 7 of 12 left this hour", r, err)
			}
			// The same key with only the per-second limit: admitted, and its
			// state is rewritten with one limit.
			if r, err := l.Allow(ctx, "k", perSec); err != nil || !r.Allowed {
				t.Fatalf("Allow(10/s): %+v %v", r, err)
			}
			r, err = l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{perSec, perHour}})
			if err != nil {
				t.Fatal(err)
			}
			if r.Binding != 0 || r.Remaining > 10 {
				t.Errorf("after Allow(10/s) the pair reads %+v: want the hourly count dropped (12 left, so the per-second limit binds); if it survived, update the docs of Allow and Request", r)
			}
		})
	}
}

func TestKeyPrefix(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
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

// TestForeignKeys: every algorithm refuses a key that is not its state
// with ErrForeignKey, whatever the failure policy, and leaves it as it was.
func TestForeignKeys(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen))
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
			for _, kind := range []Kind{KindAllow, KindCheck, KindPeek} {
				var err error
				var r Result
				switch kind {
				case KindAllow:
					r, err = l.Allow(ctx, k, PerSecond(5).WithAlgorithm(a))
				case KindCheck:
					r, err = l.Decide(ctx, Request{Kind: KindCheck, Key: k, Limits: []Limit{PerSecond(5).WithAlgorithm(a)}})
				default:
					r, err = l.Decide(ctx, Request{Kind: KindPeek, Key: k, Limits: []Limit{PerSecond(5).WithAlgorithm(a)}})
				}
				if !errors.Is(err, ErrForeignKey) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) || r.Allowed {
					t.Errorf("%s %s on %s: %+v %v, want ErrForeignKey", kind, a, k, r, err)
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

// TestResetKnowsEveryState shows that Reset deletes the state of every
// algorithm (one limit and several) and nothing else.
func TestResetKnowsEveryState(t *testing.T) {
	f := newFakeRedis(t)
	ctx := context.Background()
	l := testLimiter(f.rdb, WithKeyPrefix("rr:"))
	for a := Algorithm(0); a < numAlgorithms; a++ {
		for _, limits := range [][]Limit{{PerMinute(5).WithAlgorithm(a)}, {PerSecond(2).WithAlgorithm(a), PerHour(9).WithAlgorithm(a)}} {
			key := a.String()
			if _, err := l.Decide(ctx, Request{Key: key, Limits: limits}); err != nil {
				t.Fatal(err)
			}
			if n := f.rdb.Exists(ctx, "rr:"+key).Val(); n != 1 {
				t.Fatalf("%s: no state was written", a)
			}
			if err := l.Reset(ctx, key); err != nil {
				t.Fatalf("%s: Reset: %v", a, err)
			}
			if n := f.rdb.Exists(ctx, "rr:"+key).Val(); n != 0 {
				t.Fatalf("%s: Reset left the state", a)
			}
			res, err := l.Decide(ctx, Request{Kind: KindPeek, Key: key, Limits: limits})
			if err != nil || res.Remaining != res.Capacity {
				t.Fatalf("%s after Reset: %v, %v; want full capacity", a, res, err)
			}
		}
	}
	if err := l.Reset(ctx, "never-used"); err != nil {
		t.Fatalf("Reset of a missing key: %v", err)
	}
}

// TestResetLeavesUsersDataAlone: a key that is not limiter state is refused
// and left exactly as it was, whatever its type.
func TestResetLeavesUsersDataAlone(t *testing.T) {
	f := newFakeRedis(t)
	ctx := context.Background()
	f.rdb.Set(ctx, "order:42", "shipped", time.Hour)
	f.rdb.Set(ctx, "gcra-ish", "gcra:2", 0) // a tag without its numbers is still not ours
	f.rdb.RPush(ctx, "queue", "a", "b")
	f.rdb.ZAdd(ctx, "scores", redis.Z{Score: 1, Member: "alice"})
	f.rdb.HSet(ctx, "profile", "name", "bob")
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen))
	for _, key := range []string{"order:42", "gcra-ish", "queue", "scores", "profile"} {
		before := f.dump(key)
		err := l.Reset(ctx, key)
		if !errors.Is(err, ErrForeignKey) || errors.Is(err, ErrUnavailable) {
			t.Errorf("Reset(%q) = %v, want ErrForeignKey", key, err)
		}
		if after := f.dump(key); after != before {
			t.Errorf("Reset(%q) changed the key: %s -> %s", key, before, after)
		}
	}
}

// A nil option, or a nil *redis.Client in the redis.Scripter interface, made
// NewLimiter or the first call panic: every call returns an error matching
// ErrNoClient that names what was nil.
func TestNewLimiterNilArguments(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	for _, c := range []struct {
		name string
		make func() *Limiter
		want string
	}{
		{"nil option", func() *Limiter { return NewLimiter(f.rdb, nil) }, "option 1 of NewLimiter is nil"},
		{"nil option after others", func() *Limiter { return NewLimiter(f.rdb, WithKeyPrefix("p:"), nil) }, "option 2 of NewLimiter is nil"},
		{"nil *redis.Client", func() *Limiter { return NewLimiter((*redis.Client)(nil)) }, "nil *redis.Client"},
		{"nil *redis.ClusterClient", func() *Limiter { return NewLimiter((*redis.ClusterClient)(nil), WithDenyCache(10)) }, "nil *redis.ClusterClient"},
		{"nil UniversalClient value", func() *Limiter { var u redis.UniversalClient = (*redis.Ring)(nil); return NewLimiter(u) }, "nil *redis.Ring"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l *Limiter
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("NewLimiter panicked: %v", p)
					}
				}()
				l = c.make()
			}()
			calls := map[string]func() error{
				"Allow": func() error { _, err := l.Allow(ctx, "k", PerSecond(1)); return err },
				"Check": func() error {
					_, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{PerSecond(1)}})
					return err
				},
				"Peek": func() error {
					_, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{PerSecond(1)}})
					return err
				},
				"Wait":  func() error { _, err := l.Wait(ctx, "k", PerSecond(1)); return err },
				"Reset": func() error { return l.Reset(ctx, "k") },
				"DecideBatch": func() error {
					_, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerSecond(1)}}})
					return err
				},
			}
			for name, call := range calls {
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s panicked: %v", name, p)
						}
					}()
					err = call()
				}()
				if !errors.Is(err, ErrNoClient) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v; want ErrNoClient saying %q", name, err, c.want)
				}
			}
		})
	}
	if got := f.mr.Keys(); len(got) != 0 {
		t.Errorf("keys written: %v", got)
	}
}

func TestZeroLimiter(t *testing.T) {
	ctx := context.Background()
	var zero Limiter
	var nilL *Limiter
	for i, l := range []*Limiter{&zero, nilL, NewLimiter(nil), zero.With(WithDenyCache(10), WithFailurePolicy(FailOpen))} {
		for name, call := range callKinds(l) { // every kind of call, the Keys calls too
			if res, err := call(ctx); !errors.Is(err, ErrNoClient) || res.Allowed {
				t.Errorf("Limiter %d, %s: %+v, %v; want ErrNoClient", i, name, res, err)
			}
		}
	}
}

// TestKeyPrefixWithBrace (issue 38, finding 6): a prefix with '{' or '}'
// was accepted, though the docs forbid it: it would be every key's hash
// tag. Every call of such a Limiter (NewLimiter's or With's) returns an
// error matching ErrInvalid that names the prefix, and sends nothing.
func TestKeyPrefixWithBrace(t *testing.T) {
	f, log := newFakeRedis(t), &cmdLog{}
	f.rdb.AddHook(log)
	good := testLimiter(f.rdb)
	for _, prefix := range []string{"{rate}:", "a}"} {
		for _, l := range []*Limiter{testLimiter(f.rdb, WithKeyPrefix(prefix)), good.With(WithKeyPrefix(prefix))} {
			_, err := l.Allow(context.Background(), "k", PerSecond(1))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "invalid key prefix") || !strings.Contains(err.Error(), prefix) {
				t.Errorf("prefix %q: %v; want ErrInvalid naming the prefix", prefix, err)
			}
			if err := l.Reset(context.Background(), "k"); !errors.Is(err, ErrInvalid) {
				t.Errorf("prefix %q: Reset: %v; want ErrInvalid", prefix, err)
			}
		}
	}
	if cmds := log.take(); len(cmds) != 0 {
		t.Errorf("a Limiter with a bad prefix sent %v", cmds)
	}
	if _, err := good.Allow(context.Background(), "k", PerSecond(1)); err != nil {
		t.Errorf("the Limiter With was called on: %v", err)
	}
}
