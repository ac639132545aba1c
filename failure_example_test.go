package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/localredis"
)

// With FailClosed, a Limiter whose Redis is down denies, and says why in
// the Result; without a policy the caller gets an error matching
// ErrUnavailable.
func ExampleWithFailurePolicy() {
	// Nothing listens on port 1: Redis is down. ContextTimeoutEnabled lets
	// the caller's deadline bound every call.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	ctx := context.Background()

	_, err := redisrate.NewLimiter(rdb).Allow(ctx, "user:42", redisrate.PerSecond(5))
	fmt.Println(errors.Is(err, redisrate.ErrUnavailable))

	lim := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed))
	res, err := lim.Allow(ctx, "user:42", redisrate.PerSecond(5))
	if err != nil {
		panic(err) // only bad arguments or a foreign key get here
	}
	fmt.Println(res.Allowed, res.Source, res.RetryAfter, res.Degraded())
	// Output:
	// true
	// false fail-closed 1s true
}

// While Redis is away, a fallback Limiter on an in-process Redis decides
// with the same limits and the same scripts: limits hold per process.
func ExampleWithFallback() {
	local, err := localredis.Start()
	if err != nil {
		panic(err)
	}
	defer local.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // down
	defer rdb.Close()

	limiter := redisrate.NewLimiter(rdb, redisrate.WithFallback(local.Limiter()))
	for range 3 {
		res, err := limiter.Allow(context.Background(), "user:42", redisrate.PerMinute(2))
		fmt.Println(res.Allowed, res.Source, err)
	}
	// Output:
	// true fallback <nil>
	// true fallback <nil>
	// false fallback <nil>
}

// After the first failure, the breaker answers at once (here by FailOpen)
// instead of asking a Redis that is down, and one call in each interval
// probes Redis in the background.
func ExampleWithCircuitBreaker() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // down
	defer rdb.Close()
	limiter := redisrate.NewLimiter(rdb,
		redisrate.WithFailurePolicy(redisrate.FailOpen),
		redisrate.WithCircuitBreaker(100*time.Millisecond))
	for range 3 {
		res, _ := limiter.Allow(context.Background(), "user:42", redisrate.PerSecond(5))
		fmt.Println(res.Allowed, res.Source, errors.Is(res.Cause, redisrate.ErrUnavailable))
	}
	// Output:
	// true fail-open true
	// true fail-open true
	// true fail-open true
}

// A decision the open breaker made without asking Redis says so in its
// cause: the first call waited for Redis and failed, the next did not ask.
func ExampleErrCircuitOpen() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // down
	defer rdb.Close()
	limiter := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen))
	for range 2 {
		res, _ := limiter.Allow(context.Background(), "user:42", redisrate.PerSecond(5))
		fmt.Println(res.Source, errors.Is(res.Cause, redisrate.ErrUnavailable), errors.Is(res.Cause, redisrate.ErrCircuitOpen))
	}
	// Output:
	// fail-open true false
	// fail-open true true
}

// One line when Redis starts failing, one when it answers again: never one
// per request.
func ExampleWithLogger() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond}) // down
	defer rdb.Close()
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	limiter := redisrate.NewLimiter(rdb, redisrate.WithLogger(logger), redisrate.WithFailurePolicy(redisrate.FailClosed))
	for range 100 {
		_, _ = limiter.Allow(context.Background(), "user:42", redisrate.PerSecond(5))
	}
	// Output:
	// level=WARN msg="redisrate: Redis cannot decide; calls follow the fallback and the failure policy until it answers again" error="dial tcp 127.0.0.1:1: connect: connection refused" cause="connection refused" script=gcra key=user:… policy=fail-closed fallback=false probe_every=200ms
}

func ExampleFailurePolicy() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // down
	defer rdb.Close()
	for _, p := range []redisrate.FailurePolicy{redisrate.FailError, redisrate.FailClosed, redisrate.FailOpen} {
		limiter := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(p))
		res, err := limiter.Allow(context.Background(), "user:42", redisrate.PerMinute(6))
		fmt.Printf("%s: allowed=%v source=%s retry=%v unavailable=%v\n", p, res.Allowed, res.Source, res.RetryAfter, errors.Is(err, redisrate.ErrUnavailable))
	}
	// Output:
	// fail-error: allowed=false source=redis retry=0s unavailable=true
	// fail-closed: allowed=false source=fail-closed retry=1s unavailable=false
	// fail-open: allowed=true source=fail-open retry=0s unavailable=false
}

// A Redis that accepts connections and never answers (here a bare TCP
// listener, as a paused Redis or a wedged proxy would): the call returns at
// the decision timeout, and the failure policy answers it.
func ExampleWithDecisionTimeout() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // when the listener closes: never a word before
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rdb.Close()

	limiter := redisrate.NewLimiter(rdb,
		redisrate.WithDecisionTimeout(50*time.Millisecond),
		redisrate.WithFailurePolicy(redisrate.FailClosed))
	start := time.Now()
	res, err := limiter.Allow(context.Background(), "user:42", redisrate.PerSecond(5))
	fmt.Println(res.Allowed, res.Source, err, time.Since(start) < time.Second)
	fmt.Println(res.Cause)
	// Output:
	// false fail-closed <nil> true
	// redisrate: gcra on key "user:42": no answer from Redis within the decision timeout of 50ms (context deadline exceeded)
}

func ExampleFailurePolicy_String() {
	fmt.Println(redisrate.FailOpen.String())
	// Output: fail-open
}
