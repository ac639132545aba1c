package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// Tests of the Functions library (scripts.Library) through the Limiter:
// miniredis has no FUNCTION LOAD or FCALL, so only a real server shows them.

// sameSlack is how far apart two replies' RetryAfter and ResetAfter may be
// and still be the same decision: the two servers are asked one after the
// other, milliseconds apart, while the limits below are counted in days,
// so a different decision differs by hours.
const sameSlack = 2 * time.Second

// sameResult reports how two Results of the same call differ ("" when
// they do not).
func sameResult(a, b redisrate.Result) string {
	near := func(x, y time.Duration) bool {
		if x == math.MaxInt64 || y == math.MaxInt64 {
			return x == y
		}
		return redistest.AbsDur(x-y) <= sameSlack
	}
	switch {
	case a.Allowed != b.Allowed, a.Remaining != b.Remaining, a.Capacity != b.Capacity,
		a.Binding != b.Binding, a.Limit != b.Limit, a.Source != b.Source:
		return "different decisions"
	case !near(a.RetryAfter, b.RetryAfter):
		return "different RetryAfter"
	case !near(a.ResetAfter, b.ResetAfter):
		return "different ResetAfter"
	}
	return ""
}

// sameError reports how two errors of the same call differ ("" when they
// are the same: same text, same classification).
func sameError(a, b error) string {
	if (a == nil) != (b == nil) {
		return "one call failed"
	}
	if a == nil {
		return ""
	}
	if a.Error() != b.Error() {
		return "different errors"
	}
	for _, target := range []error{redisrate.ErrInvalid, redisrate.ErrForeignKey, redisrate.ErrUnavailable, redisrate.ErrMisconfigured} {
		if errors.Is(a, target) != errors.Is(b, target) {
			return "classified differently"
		}
	}
	return ""
}

// TestFunctionsSameReplies: with scripts.Library loaded, a Limiter decides
// every algorithm by FCALL (the server's command statistics show it, and
// no EVALSHA but Reset's), and every kind of call (Allow, AllowN, Decide
// of KindCheck and KindPeek, several limits, DecideBatch's pipeline, a cost that
// can never be admitted, Reset, a foreign key) gets the same reply, error
// and TTL as the same call by EVALSHA on a server without the library.
func TestFunctionsSameReplies(t *testing.T) {
	fAddr, _ := startRedis(t)
	eAddr, _ := startRedis(t)
	fc, ec := newClient(t, fAddr), newClient(t, eAddr)
	needRedis7(t, fc)
	loadLibrary(t, fc)
	byFCall, byEvalSha := redistest.NewLimiter(fc), redistest.NewLimiter(ec)
	ctx := context.Background()
	fBefore, eBefore := redistest.ReadCommandStats(t, fc), redistest.ReadCommandStats(t, ec)
	var compared, resets int

	// same makes one call through both Limiters and compares the answers.
	same := func(t *testing.T, what string, call func(*redisrate.Limiter) (redisrate.Result, error)) redisrate.Result {
		t.Helper()
		rf, errF := call(byFCall)
		re, errE := call(byEvalSha)
		if why := sameError(errF, errE); why != "" {
			t.Fatalf("%s: %s: by FCALL %v, by EVALSHA %v", what, why, errF, errE)
		}
		if why := sameResult(rf, re); why != "" {
			t.Fatalf("%s: %s:\n by FCALL   %+v\n by EVALSHA %+v", what, why, rf, re)
		}
		compared++
		return rf
	}
	// sameTTL compares the TTLs the calls left on key.
	sameTTL := func(t *testing.T, key string) {
		t.Helper()
		f, e := fc.PTTL(ctx, key).Val(), ec.PTTL(ctx, key).Val()
		if f <= 0 || redistest.AbsDur(f-e) > sameSlack {
			t.Fatalf("%s: PTTL %v by FCALL, %v by EVALSHA", key, f, e)
		}
	}

	for _, a := range redistest.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			limit := redisrate.Per(5, 24*time.Hour).WithAlgorithm(a)
			weekly := redisrate.Per(8, 7*24*time.Hour).WithAlgorithm(a)
			if !isWindow(a) {
				limit, weekly = limit.WithBurst(7), weekly.WithBurst(9)
			}
			capacity := limit.Capacity()
			one, two, three := "same:"+a.String()+":one", "same:"+a.String()+":two", "same:"+a.String()+":three"

			same(t, "peek of a fresh key", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: one, Limits: []redisrate.Limit{limit}})
			})
			same(t, "check of a fresh key", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: one, Limits: []redisrate.Limit{limit}})
			})
			for i := range capacity + 1 {
				res := same(t, fmt.Sprintf("allow %d", i+1), func(l *redisrate.Limiter) (redisrate.Result, error) { return l.Allow(ctx, one, limit) })
				if res.Allowed != (i < capacity) {
					t.Fatalf("allow %d of a capacity of %d: %v", i+1, capacity, res)
				}
			}
			sameTTL(t, one)
			same(t, "check of a used-up key", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: one, Limits: []redisrate.Limit{limit}})
			})
			same(t, "check of 2", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: one, Limits: []redisrate.Limit{limit}, N: 2})
			})
			if res := same(t, "a cost past the capacity", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.AllowN(ctx, one, limit, capacity+1)
			}); !res.Never() {
				t.Fatalf("cost %d of a capacity of %d: %v, want Never", capacity+1, capacity, res)
			}
			same(t, "peek of a used-up key", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: one, Limits: []redisrate.Limit{limit}})
			})
			same(t, "reset", func(l *redisrate.Limiter) (redisrate.Result, error) { return redisrate.Result{}, l.Reset(ctx, one) })
			resets++
			same(t, "allow 3 after the reset", func(l *redisrate.Limiter) (redisrate.Result, error) { return l.AllowN(ctx, one, limit, 3) })
			sameTTL(t, one)

			// Two limits on one key: the weekly one binds once the daily
			// one has room and it has not.
			for i := range 4 {
				same(t, fmt.Sprintf("multi allow %d", i+1), func(l *redisrate.Limiter) (redisrate.Result, error) {
					return l.Decide(ctx, redisrate.Request{Key: two, Limits: []redisrate.Limit{limit, weekly}, N: 2})
				})
			}
			same(t, "multi check", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: two, Limits: []redisrate.Limit{limit, weekly}})
			})
			same(t, "multi peek", func(l *redisrate.Limiter) (redisrate.Result, error) {
				return l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: two, Limits: []redisrate.Limit{limit, weekly}})
			})
			sameTTL(t, two)

			// A batch: one pipeline of FCALLs against one of EVALSHAs.
			reqs := []redisrate.Request{
				{Key: three, Limits: []redisrate.Limit{limit}, N: 2},
				{Key: three, Limits: []redisrate.Limit{limit}, Kind: redisrate.KindCheck},
				{Key: three, Limits: []redisrate.Limit{limit}, Kind: redisrate.KindPeek},
				{Key: two, Limits: []redisrate.Limit{limit, weekly}},
				{Key: three, Limits: []redisrate.Limit{limit}, N: capacity + 1},
				{Key: three, Limits: []redisrate.Limit{limit}},
			}
			rf, errF := byFCall.DecideBatch(ctx, reqs)
			re, errE := byEvalSha.DecideBatch(ctx, reqs)
			if why := sameError(errF, errE); why != "" || len(rf) != len(reqs) || len(re) != len(reqs) {
				t.Fatalf("batch: %s: by FCALL %d results, %v; by EVALSHA %d results, %v", why, len(rf), errF, len(re), errE)
			}
			for i := range reqs {
				if why := sameResult(rf[i], re[i]); why != "" {
					t.Fatalf("batch request %d: %s:\n by FCALL   %+v\n by EVALSHA %+v", i, why, rf[i], re[i])
				}
				compared++
			}
			sameTTL(t, three)

			// A key that holds a user's value is refused alike, untouched.
			foreign := "same:" + a.String() + ":foreign"
			for _, c := range []*redis.Client{fc, ec} {
				if err := c.Set(ctx, foreign, "order 42", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			same(t, "a foreign key", func(l *redisrate.Limiter) (redisrate.Result, error) {
				res, err := l.Allow(ctx, foreign, limit)
				if !errors.Is(err, redisrate.ErrForeignKey) {
					t.Errorf("a foreign key: %v, want ErrForeignKey", err)
				}
				return res, err
			})
		})
	}
	fAfter, eAfter := redistest.ReadCommandStats(t, fc), redistest.ReadCommandStats(t, ec)
	t.Logf("%d calls compared; with the library: %d FCALL, %d FCALL_RO, %d EVALSHA, %d EVAL; without: %d FCALL, %d EVALSHA, %d EVAL",
		compared, fAfter.Since(fBefore, "fcall"), fAfter.Since(fBefore, "fcall_ro"), fAfter.Since(fBefore, "evalsha"),
		fAfter.Since(fBefore, "eval"), eAfter.Since(eBefore, "fcall"), eAfter.Since(eBefore, "evalsha"), eAfter.Since(eBefore, "eval"))
	if t.Failed() {
		return
	}
	// Every decision went by FCALL where the library is: only Reset, which
	// the library does not hold, by EVALSHA (and EVAL once, to cache it).
	if n := fAfter.Since(fBefore, "fcall"); n < int64(compared)-int64(resets) {
		t.Errorf("%d FCALLs for %d decisions", n, compared-resets)
	}
	if n := fAfter.Since(fBefore, "evalsha"); n != int64(resets) {
		t.Errorf("%d EVALSHAs where the library is loaded, for %d resets", n, resets)
	}
	if n := eAfter.Since(eBefore, "fcall"); n != 0 {
		t.Errorf("%d FCALLs where the library is not loaded", n)
	}
	if n := eAfter.Since(eBefore, "evalsha"); n < int64(compared) {
		t.Errorf("%d EVALSHAs for %d decisions where the library is not loaded", n, compared)
	}
}

// TestFunctionDeleteHealed: FUNCTION DELETE of the library in the middle
// of a run. Calls that get "Function not found" go again by EVALSHA (and
// EVAL on NOSCRIPT) at once: not one call fails, for any algorithm or kind
// of call, the state written by FCALL is read by the scripts, and the
// server's statistics show FCALL before and the scripts after.
func TestFunctionDeleteHealed(t *testing.T) {
	c := libraryServer(t)
	ctx := context.Background()
	lim := redistest.NewLimiter(c)
	ro := redistest.NewLimiter(c, redisrate.WithReadOnlyCheck())
	held := func(a redisrate.Algorithm) redisrate.Limit { return redisrate.PerHour(5).WithAlgorithm(a) }
	for _, a := range redistest.Algorithms {
		for range 2 {
			if _, err := lim.Allow(ctx, "held:"+a.String(), held(a)); err != nil {
				t.Fatal(err)
			}
		}
	}

	before := redistest.ReadCommandStats(t, c)
	var made, failed atomic.Int64
	var firstErrs sync.Map
	stop := workers(4, func(w, i int) {
		a := redistest.Algorithms[(w+i)%len(redistest.Algorithms)]
		l := redisrate.PerSecond(1000).WithAlgorithm(a)
		key := fmt.Sprintf("run:%s:%d", a, i%16)
		var err error
		switch i % 4 {
		case 0, 1:
			_, err = lim.Allow(ctx, key, l)
		case 2:
			_, err = ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
		default:
			_, err = ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
		}
		made.Add(1)
		if err != nil {
			failed.Add(1)
			firstErrs.LoadOrStore(err.Error(), true)
		}
	})
	defer stop() // a failure below must not leave the workers running
	// 1,000 calls by FCALL, the delete, 1,000 calls after it.
	redistest.WaitFor(t, 30*time.Second, "1,000 calls by FCALL", func() bool { return made.Load() >= 1000 })
	mid := redistest.ReadCommandStats(t, c)
	atDelete := made.Load()
	if err := c.FunctionDelete(ctx, scripts.LibraryName).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 30*time.Second, "1,000 calls after the FUNCTION DELETE", func() bool { return made.Load() >= atDelete+1000 })
	stop()
	after := redistest.ReadCommandStats(t, c)

	fcallsBefore := mid.Since(before, "fcall", "fcall_ro")
	scriptsAfter := after.Since(mid, "evalsha", "evalsha_ro", "eval", "eval_ro")
	t.Logf("FIGURE function-delete: %d calls (%d before the FUNCTION DELETE), %d failed; %d FCALL/FCALL_RO before, %d EVALSHA/EVAL (_RO) after",
		made.Load(), atDelete, failed.Load(), fcallsBefore, scriptsAfter)
	if failed.Load() != 0 {
		firstErrs.Range(func(k, _ any) bool { t.Errorf("failed: %v", k); return true })
		t.Fatalf("%d of %d calls failed", failed.Load(), made.Load())
	}
	if fcallsBefore == 0 || scriptsAfter == 0 || made.Load() == atDelete {
		t.Fatalf("%d FCALLs before the delete, %d script calls and %d decisions after it: the test did not exercise the fallback",
			fcallsBefore, scriptsAfter, made.Load()-atDelete)
	}
	// The state FCALL wrote carries over: 2 of 5 were taken, 1 more now.
	for _, a := range redistest.Algorithms {
		res, err := lim.Allow(ctx, "held:"+a.String(), held(a))
		if err != nil || !res.Allowed || res.Remaining != 2 {
			t.Errorf("%s: the third call after FUNCTION DELETE: %v, %v; want 2 remaining", a, res, err)
		}
	}
}

// libraryServer starts a server of the test's own (with extra config args)
// and loads the library there.
func libraryServer(t *testing.T, args ...string) *redis.Client {
	t.Helper()
	addr, _ := startRedis(t, args...)
	c := newClient(t, addr)
	needRedis7(t, c)
	loadLibrary(t, c)
	return c
}

// workers runs call(w, i) on n goroutines, w numbering them and i counting
// each one's calls, until the stop it returns is called; stop returns once
// they all have, and may be called again.
func workers(n int, call func(w, i int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				call(w, i)
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// bogusLibrary is a library named redisrate of another version: its
// functions have this client's names and admit everything, writing
// nothing, and redisrate_version says "bogus".
func bogusLibrary() string {
	var b strings.Builder
	b.WriteString("#!lua name=" + scripts.LibraryName + "\n")
	b.WriteString("local function admit() return {1, 999, 0, 0, 1000, 1} end\n")
	for _, a := range redistest.Algorithms {
		s, _ := scripts.Lookup(a.String())
		fmt.Fprintf(&b, "redis.register_function('%s', admit)\n", s.Function)
		fmt.Fprintf(&b, "redis.register_function{function_name = '%s_ro', callback = admit, flags = {'no-writes'}}\n", s.Function)
	}
	b.WriteString("redis.register_function{function_name = 'redisrate_version', callback = function() return 'bogus' end, flags = {'no-writes'}}\n")
	return b.String()
}

// FUNCTION LOAD REPLACE of another version of the library while a Limiter
// runs: the client went on calling it by FCALL until its check a minute
// later (595 admissions of an exhausted key, the last 59.97 s after the
// load). Now not one decision of the other library is used: every call,
// single or batched, writing or reading, on keys its limit has exhausted,
// is denied, before and after the load, and after the load the Limiter
// goes by EVALSHA (the server's statistics show it).
func TestFunctionsOtherVersionNeverDecides(t *testing.T) {
	c := libraryServer(t)
	ctx := context.Background()
	lim := redistest.NewLimiter(c) // not about outages: a slow call on a loaded machine must not open the breaker
	limitOf := func(a redisrate.Algorithm) redisrate.Limit { return redisrate.PerHour(3).WithAlgorithm(a) }
	for _, a := range redistest.Algorithms {
		for range 3 {
			if r, err := lim.Allow(ctx, "bogus:"+a.String(), limitOf(a)); err != nil || !r.Allowed {
				t.Fatalf("%s: %v %v", a, r, err)
			}
		}
	}
	before := redistest.ReadCommandStats(t, c)
	var made, admitted, failed atomic.Int64
	var firstErr sync.Once
	stop := workers(4, func(w, i int) {
		a := redistest.Algorithms[(w+i)%len(redistest.Algorithms)]
		key := "bogus:" + a.String()
		var rs []redisrate.Result
		var err error
		switch i % 3 {
		case 0:
			var r redisrate.Result
			r, err = lim.Allow(ctx, key, limitOf(a))
			rs = append(rs, r)
		case 1:
			var r redisrate.Result
			r, err = lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limitOf(a)}})
			rs = append(rs, r)
		default:
			rs, err = lim.DecideBatch(ctx, []redisrate.Request{{Key: key, Limits: []redisrate.Limit{limitOf(a)}}, {Key: key, Limits: []redisrate.Limit{limitOf(a)}, Kind: redisrate.KindCheck}})
		}
		made.Add(1)
		if err != nil {
			failed.Add(1)
			firstErr.Do(func() { t.Errorf("a call failed: %v", err) })
		}
		for _, r := range rs {
			if r.Allowed {
				admitted.Add(1)
			}
		}
	})
	defer stop() // a failure below must not leave the workers running
	redistest.WaitFor(t, 30*time.Second, "1,000 calls by FCALL", func() bool { return made.Load() >= 1000 })
	mid := redistest.ReadCommandStats(t, c)
	atLoad := made.Load()
	if err := c.FunctionLoadReplace(ctx, bogusLibrary()).Err(); err != nil {
		t.Fatal(err)
	}
	loaded := redistest.ReadCommandStats(t, c)
	redistest.WaitFor(t, 30*time.Second, "1,000 calls after the FUNCTION LOAD REPLACE", func() bool { return made.Load() >= atLoad+1000 })
	stop()
	after := redistest.ReadCommandStats(t, c)
	t.Logf("FIGURE other-library: %d calls (%d before the FUNCTION LOAD REPLACE), %d admitted, %d failed; %d FCALL before, %d FCALL and %d EVALSHA/EVAL once it was loaded",
		made.Load(), atLoad, admitted.Load(), failed.Load(), mid.Since(before, "fcall"), after.Since(loaded, "fcall"), after.Since(loaded, "evalsha", "eval"))
	if admitted.Load() != 0 {
		t.Errorf("%d calls of exhausted keys admitted: decisions of the other library were used", admitted.Load())
	}
	if mid.Since(before, "fcall") == 0 || made.Load() == atLoad || after.Since(mid, "evalsha") == 0 {
		t.Fatal("the test did not run by FCALL before the load and by EVALSHA after it")
	}
	// Once it has met the other library, the Limiter goes by EVALSHA: after
	// the load, at most the calls each worker had in flight and the one it
	// began before the first "Function not found" came back sent an FCALL
	// (a batch has 2), each of which Redis refused, running nothing.
	if n := after.Since(loaded, "fcall"); n > 16 {
		t.Errorf("%d FCALLs after the other library was loaded; want at most 2 calls of each of the 4 workers (a batch has 2)", n)
	}
}

// Under maxmemory with noeviction, Redis refuses FCALL of a writing
// function with OOM before it runs, even for a denial: a FailOpen Limiter
// with the library loaded then admitted what its limit denies. Now every
// call kind decides as guarantee 10 says: a denial, a cost past the
// capacity, a check and a peek are Redis's answers (a denial by EVALSHA,
// checks by the _ro functions, which Redis runs under OOM); only a call that
// would write fails with OOM, which the failure policy answers. The
// Limiter keeps trying FCALL: the library is not in question.
func TestFunctionsOOMDecidesWhatWritesNothing(t *testing.T) {
	c := libraryServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	open := redistest.NewLimiter(c, redisrate.WithFailurePolicy(redisrate.FailOpen), redisrate.WithCircuitBreaker(0)) // a slow call must not be FailOpen's
	limitOf := func(a redisrate.Algorithm) redisrate.Limit { return redisrate.PerHour(3).WithAlgorithm(a) }
	for _, a := range redistest.Algorithms {
		for range 3 {
			if r, err := open.Allow(ctx, "oom:full:"+a.String(), limitOf(a)); err != nil || !r.Allowed {
				t.Fatalf("%s: %v %v", a, r, err)
			}
		}
		if r, err := open.Allow(ctx, "oom:room:"+a.String(), limitOf(a)); err != nil || !r.Allowed {
			t.Fatalf("%s: %v %v", a, r, err)
		}
	}
	junk := strings.Repeat("x", 1024)
	for i := 0; ; i++ {
		err := c.Set(ctx, fmt.Sprint("oom:fill:", i), junk, 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			break
		}
		if err != nil || i > 100000 {
			t.Fatalf("filling to maxmemory: %d fillers, %v", i, err)
		}
	}
	// Redis judges OOM when a command starts, from used_memory, which
	// swings by kilobytes: a limit far below the memory in use keeps every
	// later command over it.
	if err := c.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FCall(ctx, "redisrate_gcra", []string{"oom:full:gcra"}, 3, 3600000).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("FCALL of a denial at maxmemory: %v; want Redis's OOM, which this test is about", err)
	}
	before := redistest.ReadCommandStats(t, c)
	for _, a := range redistest.Algorithms {
		l := limitOf(a)
		full, room := "oom:full:"+a.String(), "oom:room:"+a.String()
		dump := c.Dump(ctx, full).Val()
		if r, err := open.Allow(ctx, full, l); err != nil || r.Allowed || r.Source != redisrate.SourceRedis || r.RetryAfter <= 0 {
			t.Errorf("%s: Allow of an exhausted key at maxmemory: %v, %v; want Redis's denial", a, r, err)
		}
		if r, err := open.AllowN(ctx, room, l, 4); err != nil || !r.Never() || r.Source != redisrate.SourceRedis {
			t.Errorf("%s: a cost past the capacity at maxmemory: %v, %v; want Redis's never", a, r, err)
		}
		rs, err := open.DecideBatch(ctx, []redisrate.Request{{Key: full, Limits: []redisrate.Limit{l}}, {Key: room, Limits: []redisrate.Limit{l}, Kind: redisrate.KindCheck}})
		if err != nil || rs[0].Allowed || rs[0].Source != redisrate.SourceRedis || !rs[1].Allowed || rs[1].Source != redisrate.SourceRedis {
			t.Errorf("%s: a batch at maxmemory: %v, %v; want Redis's denial and Redis's check", a, rs, err)
		}
		if r, err := open.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: full, Limits: []redisrate.Limit{l}}); err != nil || r.Allowed || r.Source != redisrate.SourceRedis {
			t.Errorf("%s: Check at maxmemory: %v, %v", a, r, err)
		}
		if r, err := open.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: room, Limits: []redisrate.Limit{l}}); err != nil || r.Remaining != 2 || r.Source != redisrate.SourceRedis {
			t.Errorf("%s: Peek at maxmemory: %v, %v", a, r, err)
		}
		// What would write fails with OOM: the policy answers.
		if r, err := open.Allow(ctx, room, l); err != nil || r.Source != redisrate.SourceFailOpen || !errors.Is(r.Cause, redisrate.ErrUnavailable) || !strings.Contains(r.Cause.Error(), "OOM") {
			t.Errorf("%s: Allow with room at maxmemory: %v, %v; want FailOpen's answer to Redis's OOM", a, r, err)
		}
		if d := c.Dump(ctx, full).Val(); d != dump {
			t.Errorf("%s: the exhausted key changed", a)
		}
	}
	after := redistest.ReadCommandStats(t, c)
	t.Logf("FIGURE fcall-oom: %d FCALL, %d EVALSHA, for 6 algorithms x 7 decisions", after.Since(before, "fcall"), after.Since(before, "evalsha"))
	// The Limiter kept going by FCALL: the checks and peeks ran there (the
	// _ro functions, which Redis runs under OOM; the refused FCALLs count
	// as rejected calls, not calls): the library is not in question.
	if n := after.Since(before, "fcall"); n < int64(len(redistest.Algorithms)*3) {
		t.Errorf("%d FCALL run for 6 algorithms x 3 checks and peeks: the Limiter stopped going by FCALL", n)
	}
}
