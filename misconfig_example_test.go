package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// A deployment the server refuses (here a password rotated on the server
// but not in the service) is found at start-up by a peek, which runs the
// script and takes nothing; and at every call after, under every failure
// policy, it is the error, never an admission. It is logged at level Error
// (through slog.Default without WithLogger), once, then once a minute.
func ExampleErrMisconfigured() {
	mr := miniredis.NewMiniRedis()
	mr.RequireAuth("the new password")
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: "the old password"})
	defer rdb.Close()
	ctx := context.Background()
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))

	limiter := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen), redisrate.WithLogger(logger))
	limit := redisrate.PerSecond(5)
	// At start-up, before serving (the middleware's Limiter too):
	_, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "start-up", Limits: []redisrate.Limit{limit}})
	if errors.Is(err, redisrate.ErrMisconfigured) {
		fmt.Println("fix the deployment:", err)
	} else if err != nil {
		fmt.Println("not ready:", err) // ErrUnavailable: Redis down, a wrong address; ErrInvalid: the limit, the key prefix
	}

	res, err := limiter.Allow(ctx, "user:42", limit)
	fmt.Println(res.Allowed, errors.Is(err, redisrate.ErrMisconfigured), errors.Is(err, redisrate.ErrUnavailable))
	// Output:
	// level=ERROR msg="redisrate: Redis refused the call: the deployment is misconfigured, not down; every call fails with this error, whatever the failure policy, until it is fixed" error="WRONGPASS invalid username-password pair" script=gcra key=… since_last_line=0 repeats_every=1m0s
	// fix the deployment: redisrate: gcra on key "start-up": WRONGPASS invalid username-password pair
	// false true false
}
