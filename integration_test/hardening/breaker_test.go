package hardening

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// Fast answers while Redis is down. With the circuit breaker (on by
// default), after the first failure a decision does not wait for Redis:
// the policy answers at once, and Redis decides again within about a
// probe interval of its return. Measured with Redis stopped, paused with
// CLIENT PAUSE, and busy with DEBUG SLEEP, with go-redis's default options
// (retries and all) and with the recommended ones. The figures are logged;
// the assertions are generous bounds (a shared CI machine).
func TestBreakerFastAnswers(t *testing.T) {
	redistest.NeedLocal(t, "stops, pauses and restarts its server")
	srv := redistest.StartServer(t, redistest.Options{Config: []string{"enable-debug-command yes"}})
	admin := srv.Client(&redis.Options{MaxRetries: -1})
	probe := srv.Client(&redis.Options{MaxRetries: -1, ContextTimeoutEnabled: true})
	ctx := context.Background()
	limit := redisrate.PerSecond(1000)

	clients := []struct {
		name   string
		opts   *redis.Options
		outage time.Duration // long enough for the first call to fail and a second of decisions after it
	}{
		{"go-redis defaults", &redis.Options{}, 1500 * time.Millisecond},
		{"recommended (ContextTimeoutEnabled, MaxRetries -1)", &redis.Options{ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond}, 1500 * time.Millisecond},
	}
	// Each outage starts, lasts d, and returns when Redis answers again.
	outages := []struct {
		name  string
		start func(d time.Duration) (back func() time.Time)
	}{
		{"stopped", func(d time.Duration) func() time.Time {
			srv.Stop()
			return func() time.Time { srv.Restart(); return time.Now() }
		}},
		{"CLIENT PAUSE", func(d time.Duration) func() time.Time {
			if err := admin.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			end := time.Now().Add(d)
			return func() time.Time { time.Sleep(time.Until(end)); return end }
		}},
		{"DEBUG SLEEP", func(d time.Duration) func() time.Time {
			done := make(chan time.Time, 1)
			sleeper := srv.Client(&redis.Options{MaxRetries: -1, ReadTimeout: 30 * time.Second})
			go func() {
				_ = sleeper.Do(ctx, "DEBUG", "SLEEP", d.Seconds()).Err()
				done <- time.Now()
			}()
			for deadline := time.Now().Add(5 * time.Second); ; { // until it sleeps
				pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				err := probe.Ping(pctx).Err()
				cancel()
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("DEBUG SLEEP did not start within 5 s")
				}
				time.Sleep(5 * time.Millisecond)
			}
			return func() time.Time { return <-done }
		}},
	}
	for _, c := range clients {
		for _, o := range outages {
			// go-redis's defaults retry a timed-out read 3 times, 3 s each,
			// so a pause shorter than 12 s would never be seen as a
			// failure; the decision timeout ends each wait at 200 ms with
			// them too.
			redistest.WaitFor(t, 30*time.Second, "the server to answer again", func() bool { return admin.Ping(ctx).Err() == nil })
			rdb := srv.Client(c.opts)
			l := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen))
			if res, err := l.Allow(ctx, "k", limit); err != nil || res.Source != redisrate.SourceRedis {
				t.Fatalf("%s, %s: before: %v, %v", c.name, o.name, res, err)
			}
			back := o.start(c.outage)
			call := func() (redisrate.Result, time.Duration) {
				// The Limiter's decision timeout (200 ms) ends a wait: a
				// caller's own deadline would be the caller's, not Redis
				// failing.
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				start := time.Now()
				res, err := l.Allow(cctx, "k", limit)
				if err != nil || !res.Allowed {
					t.Fatalf("%s, %s: %v, %v; want FailOpen's admission", c.name, o.name, res, err)
				}
				return res, time.Since(start)
			}
			// The first call meets the failure; the ones after it must not
			// wait for it.
			res, first := call()
			if res.Source != redisrate.SourceFailOpen {
				t.Fatalf("%s, %s: the first call during the outage: %v", c.name, o.name, res)
			}
			var lat []time.Duration
			for since := time.Now(); time.Since(since) < time.Second; {
				res, took := call()
				if res.Source != redisrate.SourceFailOpen {
					t.Fatalf("%s, %s: during the outage: %v", c.name, o.name, res)
				}
				lat = append(lat, took)
				time.Sleep(200 * time.Microsecond)
			}
			returned := back()
			var recovered time.Duration
			for {
				res, err := l.Allow(ctx, "k", limit)
				if err == nil && res.Source == redisrate.SourceRedis {
					recovered = time.Since(returned)
					break
				}
				if time.Since(returned) > 10*time.Second {
					t.Fatalf("%s, %s: Redis does not decide again 10 s after its return: %v, %v", c.name, o.name, res, err)
				}
				time.Sleep(time.Millisecond)
			}
			slices.Sort(lat)
			p99 := lat[len(lat)*99/100]
			redistest.Report(t, "breaker "+o.name+", "+c.name, "first failure answered after %v; then %d decisions in 1 s, p50 %v, p99 %v, max %v; Redis's decisions again %v after its return",
				first.Round(time.Microsecond), len(lat), lat[len(lat)/2].Round(time.Microsecond), p99.Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), recovered.Round(time.Millisecond))
			// Generous bounds: the targets are 5 ms and 1 s.
			if p99 > 50*time.Millisecond {
				t.Errorf("%s, %s: p99 of a decision while Redis is down is %v", c.name, o.name, p99)
			}
			if recovered > 3*time.Second {
				t.Errorf("%s, %s: Redis decides again only %v after its return", c.name, o.name, recovered)
			}
		}
	}

	// Without the breaker every call waits for the failure itself, up to
	// the decision timeout: the figure the breaker improves on (go-redis
	// defaults, Redis stopped).
	srv.Stop()
	l := redisrate.NewLimiter(srv.Client(nil), redisrate.WithFailurePolicy(redisrate.FailOpen), redisrate.WithCircuitBreaker(0))
	var slow []time.Duration
	for range 3 {
		start := time.Now()
		res, err := l.Allow(ctx, "k", limit)
		slow = append(slow, time.Since(start))
		if err != nil || res.Source != redisrate.SourceFailOpen || !errors.Is(res.Cause, redisrate.ErrUnavailable) {
			t.Fatalf("no breaker, stopped: %v, %v", res, err)
		}
	}
	redistest.Report(t, "no breaker, stopped, go-redis defaults", "each call answered by the policy after %v", slow)
}
