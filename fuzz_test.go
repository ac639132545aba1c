package redisrate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/scriptfuzz"
)

// FuzzScripts drives the raw scripts, on miniredis, with arbitrary ARGV and
// key contents of every type: never a Lua runtime error, always a contract
// reply or an ERR naming the argument, never a write on an error, a denial
// or a check. Run it with
//
//	go test -run '^$' -fuzz FuzzScripts -fuzztime 5m .
//
// Plain `go test` runs the seeds and the corpus in testdata/fuzz.
func FuzzScripts(f *testing.F) {
	for _, in := range scriptfuzz.Seeds() {
		f.Add(in.Algo, in.Kind, in.Data, in.NumKeys, in.Key, in.Argv)
	}
	mr := miniredis.RunT(f)
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2, DisableIdentity: true})
	f.Cleanup(func() { _ = rdb.Close() })
	var calls, refused atomic.Int64
	f.Cleanup(func() {
		if testing.Verbose() {
			f.Logf("%d calls, %d refused with a contract error", calls.Load(), refused.Load())
		}
	})
	f.Fuzz(func(t *testing.T, algo, kind uint8, data string, numKeys uint8, key, argv string) {
		in := scriptfuzz.Input{Algo: algo, Kind: kind, Data: data, NumKeys: numKeys, Key: key, Argv: argv}
		out, err := scriptfuzz.Check(context.Background(), rdb, in)
		if errors.Is(err, scriptfuzz.ErrCostly) {
			t.Skip(err) // legal, and as slow as the contract says
		}
		if errors.Is(err, scriptfuzz.ErrServer) {
			t.Skipf("miniredis: %v", err) // e.g. a stream entry it refuses
		}
		if err != nil {
			t.Fatalf("%v\n%v", in, err)
		}
		calls.Add(1)
		if out == scriptfuzz.Refused {
			refused.Add(1)
		}
	})
}
