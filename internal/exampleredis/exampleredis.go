// Package exampleredis starts the embedded Redis the packages' Examples run
// on: a miniredis whose clock stands at a fixed time, so that they print the
// same every time.
package exampleredis

import (
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Start starts the embedded Redis and returns a client of it, and a
// function that closes both.
func Start() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}
