package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// perMinute is a limit that nothing refills during a test: decisions then
// do not depend on how long the test takes.
func perMinute(a redisrate.Algorithm) redisrate.Limit {
	return redisrate.PerMinute(3).WithAlgorithm(a)
}

// TestScriptFlushHealed: after SCRIPT FLUSH the Limiter's EVALSHA gets
// NOSCRIPT, falls back to EVAL (EVAL_RO for a read-only check) and goes on
// with the same state, without an error reaching the caller; the script is
// then cached again.
func TestScriptFlushHealed(t *testing.T) {
	r := openRedis(t)
	ctx := context.Background()
	lim := redistest.NewLimiter(r.Client)
	ro := redistest.NewLimiter(r.Client, redisrate.WithReadOnlyCheck())
	readOnly := serverMajor(t, r.Client) >= 7 // EVALSHA_RO needs Redis 7
	if !readOnly {
		t.Log("a server older than Redis 7: the read-only check after SCRIPT FLUSH is not tried")
	}
	// 3 per minute: two allows take 2; a check or a cost-0 read takes none.
	steps := []struct {
		do   string
		left int64 // remaining in the reply
	}{
		{"allow", 2}, {"flush", 0}, {"allow", 1}, {"flush", 0}, {"check", 0},
		{"flush", 0}, {"peek", 1}, {"flush", 0}, {"ro-check", 0},
	}
	for _, a := range redistest.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			l := perMinute(a)
			s := script(t, a)
			key := r.Key("flush:" + a.String())
			for i, step := range steps {
				var res redisrate.Result
				var err error
				switch step.do {
				case "flush":
					if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
					if ok := r.Client.ScriptExists(ctx, s.SHA1).Val(); len(ok) != 1 || ok[0] {
						t.Fatalf("SCRIPT EXISTS after SCRIPT FLUSH: %v", ok)
					}
					continue
				case "allow":
					res, err = lim.Allow(ctx, key, l)
				case "check":
					res, err = lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
				case "peek":
					res, err = lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
				case "ro-check":
					if !readOnly {
						continue
					}
					res, err = ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
				}
				if err != nil {
					t.Fatalf("step %d (%s) right after SCRIPT FLUSH: %v", i+1, step.do, err)
				}
				if !res.Allowed || res.Remaining != step.left {
					t.Fatalf("step %d (%s): %v, want allowed with %d remaining: the state did not carry over", i+1, step.do, res, step.left)
				}
				// EVAL (and EVAL_RO) cache the script again.
				if ok := r.Client.ScriptExists(ctx, s.SHA1).Val(); len(ok) != 1 || !ok[0] {
					t.Fatalf("step %d (%s): the script was not cached again", i+1, step.do)
				}
			}
		})
	}
}

// TestScriptFlushUnderLoad: 16 goroutines decide on every algorithm while
// another flushes the script cache every 2 ms; not one error reaches a
// caller, and the fallback to EVAL was really taken.
func TestScriptFlushUnderLoad(t *testing.T) {
	r := openRedis(t)
	ctx := context.Background()
	lim := redistest.NewLimiter(r.Client)
	before := redistest.ReadCommandStats(t, r.Client)
	stop := make(chan struct{})
	var flushes atomic.Int64
	var flusher sync.WaitGroup
	flusher.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
				t.Errorf("SCRIPT FLUSH: %v", err)
				return
			}
			flushes.Add(1)
		}
	})
	var calls, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 150 {
				a := redistest.Algorithms[(w+i)%len(redistest.Algorithms)]
				l := redisrate.PerSecond(1000).WithAlgorithm(a)
				var err error
				if i%3 == 0 {
					_, err = lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: r.Key("load:" + a.String()), Limits: []redisrate.Limit{l}})
				} else {
					_, err = lim.Allow(ctx, r.Key("load:"+a.String()), l)
				}
				calls.Add(1)
				if err != nil {
					if failed.Add(1) <= 5 {
						t.Errorf("call failed during SCRIPT FLUSH: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flusher.Wait()
	after := redistest.ReadCommandStats(t, r.Client)
	evals := after["eval"] - before["eval"]
	t.Logf("%d calls, %d failed, %d SCRIPT FLUSH, %d fallbacks to EVAL", calls.Load(), failed.Load(), flushes.Load(), evals)
	if failed.Load() > 0 {
		t.Fatalf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	if flushes.Load() == 0 || evals == 0 {
		t.Fatalf("%d flushes and %d EVAL fallbacks: the test did not exercise NOSCRIPT", flushes.Load(), evals)
	}
}

// TestKeysExpire: an admitted request leaves the key with a TTL equal to its
// reset_after (guarantee 3: no longer than needed), and the key is gone
// once that has passed, for every algorithm, with periods of tens of ms.
func TestKeysExpire(t *testing.T) {
	r := openRedis(t)
	loadScripts(t, r.Client)
	ctx := context.Background()
	for _, c := range shortLimits(2, 30*time.Millisecond, 3) {
		t.Run(c.algo.String(), func(t *testing.T) {
			t.Parallel()
			s := script(t, c.algo)
			key := r.Key("ttl:" + c.algo.String())
			var ev *redis.Cmd
			var pttl *redis.DurationCmd
			for range 2 {
				_, err := r.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
					ev = p.EvalSha(ctx, s.SHA1, []string{key}, rawArgs(t, 1, false, c.limit)...)
					pttl = p.PTTL(ctx, key)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			reply := ints(t, ev.Val())
			reset := time.Duration(reply[3]) * time.Millisecond
			ttl := pttl.Val()
			// The TTL is set in whole ms, the PTTL read in the same MULTI:
			// at most a tick of the server's millisecond clock apart.
			if reply[0] != 1 || ttl > reset || ttl < reset-time.Millisecond {
				t.Fatalf("reply %v, PTTL %v: want admitted with PTTL in [reset_after-1ms, reset_after]", reply, ttl)
			}
			start := time.Now()
			for r.Client.Exists(ctx, key).Val() == 1 {
				if time.Since(start) > reset+2*time.Second {
					t.Fatalf("key still there %v after a TTL of %v", time.Since(start), ttl)
				}
				time.Sleep(2 * time.Millisecond)
			}
			t.Logf("TTL %v, gone after %v", ttl, time.Since(start).Round(time.Millisecond))
			// No state is the same as a fresh key.
			res := ints(t, r.Client.EvalSha(ctx, s.SHA1, []string{key}, rawArgs(t, 0, false, c.limit)...).Val())
			if want := c.limit.Capacity(); res[1] != want || res[3] != 0 {
				t.Fatalf("after expiry: %v, want %d remaining and reset_after 0", res, want)
			}
		})
	}
}
