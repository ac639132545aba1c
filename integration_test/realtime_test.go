package integration

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// The contract with Redis's real clock. Periods are tens of milliseconds so
// the tests stay fast; instead of assuming how long a call took, they read
// the server's own clock around the calls and assert bounds that hold
// whatever the scheduling delays.

const (
	rtRate   = 4
	rtPeriod = 40 * time.Millisecond
	rtBurst  = 6 // buckets; windows take rtRate
)

// maxWait is the longest retry_after a denied single unit may get when the
// key was just emptied.
func maxWait(l redisrate.Limit) time.Duration {
	switch l.Algorithm {
	case redisrate.GCRA, redisrate.LeakyBucket:
		return l.Period/time.Duration(l.Rate) + time.Millisecond
	case redisrate.SlidingWindow:
		return 2 * l.Period
	default:
		return l.Period
	}
}

// TestRetryAfterHonestRealTime: through the Go client, a denied request
// slept for exactly its RetryAfter is admitted (guarantee 5), three times
// over, for every algorithm; a cost over the capacity is Never.
func TestRetryAfterHonestRealTime(t *testing.T) {
	r := openRedis(t)
	lim := redistest.NewLimiter(r.Client)
	ctx := context.Background()
	for _, c := range shortLimits(rtRate, rtPeriod, rtBurst) {
		t.Run(c.algo.String(), func(t *testing.T) {
			t.Parallel()
			key := r.Key("honest:" + c.algo.String())
			cap := c.limit.Capacity()
			for i := range cap {
				res, err := lim.Allow(ctx, key, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					t.Fatalf("call %d of a full key (capacity %d) denied: %v", i+1, cap, res)
				}
				if res.Capacity != cap || res.RetryAfter != 0 {
					t.Fatalf("call %d: %+v: want capacity %d, no retry", i+1, res, cap)
				}
			}
			for round := 1; round <= 3; round++ {
				var denied redisrate.Result
				for tries := 0; ; tries++ {
					res, err := lim.Allow(ctx, key, c.limit)
					if err != nil {
						t.Fatal(err)
					}
					if !res.Allowed {
						denied = res
						break
					}
					if tries > 3*int(cap) {
						t.Fatalf("round %d: never denied after %d calls", round, tries)
					}
				}
				if denied.RetryAfter <= 0 || denied.RetryAfter > maxWait(c.limit) || denied.Remaining != 0 {
					t.Fatalf("round %d: denial %+v: want 0 remaining and 0 < RetryAfter <= %v", round, denied, maxWait(c.limit))
				}
				time.Sleep(denied.RetryAfter)
				res, err := lim.Allow(ctx, key, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					t.Fatalf("round %d: denied with RetryAfter %v; after sleeping that long: %v", round, denied.RetryAfter, res)
				}
			}
			res, err := lim.AllowN(ctx, key, c.limit, cap+1)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Never() || res.RetryAfter != math.MaxInt64 {
				t.Fatalf("cost %d over capacity %d: %+v, want Never", cap+1, cap, res)
			}
		})
	}
}

// TestRetryAndResetExactRealTime calls the raw scripts with EVALSHA, each
// call inside MULTI between two TIME calls, so the moment the script read
// its clock is known within microseconds. After a denial with retry_after R
// (taken at [a0, a1]), the same request is polled with mode check:
//
//   - every check that surely ran before a0 + R - 1 ms is denied (R is
//     rounded up, so the exact wait is more than R - 1 ms),
//   - every check that surely ran at a1 + R or later is admitted,
//   - each denied check's own retry_after points at the same instant.
//
// Then, after an admitted call with reset_after Z, cost-0 calls show the key
// below capacity before Z - 1 ms and at full capacity from Z on.
func TestRetryAndResetExactRealTime(t *testing.T) {
	r := openRedis(t)
	loadScripts(t, r.Client)
	for _, c := range shortLimits(rtRate, rtPeriod, rtBurst) {
		t.Run(c.algo.String(), func(t *testing.T) {
			t.Parallel()
			s := script(t, c.algo)
			key := r.Key("exact:" + c.algo.String())
			cap := c.limit.Capacity()
			allow := rawArgs(t, 1, false, c.limit)
			check := rawArgs(t, 1, true, c.limit)
			peek := rawArgs(t, 0, false, c.limit)

			// A round: take units until denied, then poll checks past the
			// retry time. A round shows something only if a check ran
			// before the retry time; a loaded machine may not manage one
			// before a short retry_after, so up to exactRounds are tried.
			var early, late int
			for round := 1; round <= exactRounds && early == 0; round++ {
				late = 0
				var deny bracketed
				for i := int64(0); ; i++ {
					b := evalBracketed(t, r.Client, s, key, allow...)
					if round == 1 && i < cap && b.reply[0] != 1 {
						t.Fatalf("call %d of a full key (capacity %d) denied: %v", i+1, cap, b.reply)
					}
					if b.reply[0] == 0 {
						deny = b
						break
					}
					if i > 3*cap {
						t.Fatal("never denied")
					}
				}
				R := deny.reply[2] * 1000 // µs
				if R <= 0 || R > maxWait(c.limit).Microseconds() {
					t.Fatalf("denial %v: want 0 < retry_after <= %v", deny.reply, maxWait(c.limit))
				}
				poll(t, r.Client, deny.after+R, func(b bracketed) {
					ok := b.reply[0] == 1
					switch {
					case b.after < deny.before+R-1000:
						early++
						if ok {
							t.Errorf("check %d µs after the denial admitted; retry_after was %d ms", b.after-deny.before, R/1000)
						}
					case b.before >= deny.after+R:
						late++
						if !ok {
							t.Errorf("check %d µs after the denial denied (%v); retry_after was %d ms", b.before-deny.after, b.reply, R/1000)
						}
					}
					if !ok {
						R2 := b.reply[2] * 1000
						// The admission instant lies in (a0+R-1ms, a1+R] and
						// in (c0+R2-1ms, c1+R2]: the intervals must meet.
						if !(b.before+R2-1000 < deny.after+R && deny.before+R-1000 < b.after+R2) {
							t.Errorf("check at +%d µs says retry in %d ms, the denial at 0 said %d ms", b.before-deny.before, R2/1000, R/1000)
						}
					}
				}, s, key, check)
				t.Logf("round %d: retry_after %d ms: %d checks surely early (all denied), %d surely late (all admitted)", round, R/1000, early, late)
			}
			if early == 0 {
				t.Errorf("in %d rounds no check ran before the retry time: the test showed nothing", exactRounds)
			}

			early = 0
			for round := 1; round <= exactRounds && early == 0; round++ {
				adm := evalBracketed(t, r.Client, s, key, allow...)
				if adm.reply[0] != 1 {
					t.Fatalf("after an admitted check or a reset, the call was denied: %v", adm.reply)
				}
				Z := adm.reply[3] * 1000
				if Z <= 0 {
					t.Fatalf("admitted call %v: want reset_after > 0", adm.reply)
				}
				late = 0
				poll(t, r.Client, adm.after+Z, func(b bracketed) {
					full := b.reply[1] == cap
					switch {
					case b.after < adm.before+Z-1000:
						early++
						if full {
							t.Errorf("full capacity %d µs after a call with reset_after %d ms", b.after-adm.before, Z/1000)
						}
					case b.before >= adm.after+Z:
						late++
						if !full || b.reply[3] != 0 {
							t.Errorf("%d µs after a call with reset_after %d ms: %v, want %d remaining and reset_after 0", b.before-adm.after, Z/1000, b.reply, cap)
						}
					}
				}, s, key, peek)
				t.Logf("round %d: reset_after %d ms: %d reads surely early (below capacity), %d surely late (full)", round, Z/1000, early, late)
			}
			if early == 0 {
				t.Errorf("in %d rounds no read ran before the reset time: the test showed nothing", exactRounds)
			}
		})
	}
}

// exactRounds is how many rounds TestRetryAndResetExactRealTime tries for
// one that shows something. A denial's retry_after is anywhere in (0, 11 ms]
// for gcra and leaky_bucket here, and on a loaded machine a bracketed check
// takes a millisecond or more, so a round often sees no check before a
// short retry time: with two busy loops and the module's other packages
// running, about one round in four of those two algorithms saw none, and
// 5 rounds all missed about once in 700. The loop stops at the first round
// that shows something, so more rounds cost nothing where the first one
// does.
const exactRounds = 50

// poll calls s on key with args, bracketed, about every 300 µs, and hands
// each reply to see, until a call that surely ran at untilUs (server clock,
// µs) or later has been seen.
func poll(t *testing.T, c *redis.Client, untilUs int64, see func(bracketed), s scripts.Spec, key string, args []any) {
	t.Helper()
	giveUp := time.Now().Add(time.Duration(untilUs-serverTime(t, c))*time.Microsecond + 5*time.Second)
	for {
		b := evalBracketed(t, c, s, key, args...)
		see(b)
		if b.before >= untilUs {
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("the server's clock did not reach %d µs", untilUs)
		}
		time.Sleep(300 * time.Microsecond)
	}
}
