package redisrate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDecideBatchMatchesSingleCalls decides the same requests once by batch
// and once one by one, on twin keys, and wants the same results in order.
func TestDecideBatchMatchesSingleCalls(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := testLimiter(f.rdb)
	var reqs []Request
	for round := 0; round < 3; round++ {
		for a := GCRA; a < numAlgorithms; a++ {
			lim := PerMinute(2).WithAlgorithm(a)
			reqs = append(reqs, Request{Key: "b:" + a.String(), Limits: []Limit{lim}, N: 1})
			reqs = append(reqs, Request{Key: "b:" + a.String() + ":check", Limits: []Limit{lim}, N: 1, Kind: KindCheck})
		}
		reqs = append(reqs, Request{Key: "b:multi", Limits: []Limit{PerSecond(10), PerMinute(2)}, N: 1})
		reqs = append(reqs, Request{Key: "b:zero", Limits: []Limit{PerMinute(2)}, N: 0})
	}
	// one batch holding three rounds for the same keys: each key's requests
	// are decided in order, as single calls would be
	got, err := l.DecideBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(got), len(reqs))
	}
	for i, r := range reqs {
		n := max(r.N, 1)
		var want Result
		var err error
		want, err = l.Decide(ctx, Request{Kind: r.Kind, Key: "s" + r.Key[1:], Limits: r.Limits, N: n})
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Key != r.Key || want.Key != "s"+r.Key[1:] {
			t.Errorf("request %d: Result.Key %q, single %q, want the request's key", i, got[i].Key, want.Key)
		}
		want.Key = r.Key
		if got[i] != want {
			t.Errorf("request %d (%s %v n=%v %v): batch %+v, single %+v", i, r.Key, r.Limits, r.N, r.Kind, got[i], want)
		}
	}
	// the batch went in one pipeline, plus one to load the scripts once
	if len(cnt.pipes) < 1 || len(cnt.pipes[0]) != len(reqs) {
		t.Fatalf("pipelines sent: %d, first of %d commands; want one of %d", len(cnt.pipes), len(cnt.pipes[0]), len(reqs))
	}
	if got[0].Allowed != true || got[2*int(numAlgorithms)+2].Allowed != true || got[4*int(numAlgorithms)+4].Allowed {
		t.Errorf("the first key's three rounds: %v %v %v, want allowed, allowed, denied", got[0].Allowed, got[2*int(numAlgorithms)+2].Allowed, got[4*int(numAlgorithms)+4].Allowed)
	}
}

func TestDecideBatchHealsNoScriptPerCommand(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := testLimiter(f.rdb)
	// only gcra is loaded: the token_bucket calls come back NOSCRIPT
	if err := f.rdb.ScriptLoad(ctx, specs[GCRA].Source).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := []Request{
		{Key: "g1", Limits: []Limit{PerSecond(5)}, N: 1},
		{Key: "t1", Limits: []Limit{PerSecond(5).WithAlgorithm(TokenBucket)}, N: 1},
		{Key: "g2", Limits: []Limit{PerSecond(5)}, N: 1},
		{Key: "t2", Limits: []Limit{PerSecond(5).WithAlgorithm(TokenBucket)}, N: 2},
	}
	res, err := l.DecideBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Allowed || r.Capacity != 5 {
			t.Errorf("request %d: %+v, want allowed of 5", i, r)
		}
	}
	if res[3].Remaining != 3 {
		t.Errorf("t2 remaining %d, want 3", res[3].Remaining)
	}
	if len(cnt.pipes) != 2 {
		t.Fatalf("%d pipelines %v, want 2 (the batch, then the NOSCRIPT ones again)", len(cnt.pipes), cnt.pipes)
	}
	if fmt.Sprint(cnt.pipes[1]) != "[eval eval]" {
		t.Fatalf("second pipeline %v, want only the two token_bucket calls, by EVAL", cnt.pipes[1])
	}
	// each key was recorded exactly once
	for _, k := range []string{"g1", "t1", "g2"} {
		if r, _ := l.Decide(ctx, Request{Kind: KindCheck, Key: k, Limits: []Limit{reqs[0].Limits[0].WithAlgorithm(map[string]Algorithm{"g": GCRA, "t": TokenBucket}[k[:1]])}}); r.Remaining != 3 {
			t.Errorf("%s: remaining %d after the batch's one unit, want 3 (before this check's unit: 4)", k, r.Remaining)
		}
	}
	// now both are loaded: one pipeline
	before := len(cnt.pipes)
	if _, err := l.DecideBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if len(cnt.pipes)-before != 1 {
		t.Fatalf("with the scripts loaded: %d pipelines, want 1", len(cnt.pipes)-before)
	}
}

func TestDecideBatchPerRequestErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	f.rdb.Set(ctx, "users", "order 42", 0)
	l := testLimiter(f.rdb)
	reqs := []Request{
		{Key: "ok", Limits: []Limit{PerSecond(5)}, N: 1},
		{Key: "bad", Limits: []Limit{PerSecond(-1)}, N: 1},
		{Key: "users", Limits: []Limit{PerSecond(5)}, N: 1},
		{Key: "none", N: 1},
		{Key: "ok2", Limits: []Limit{PerSecond(5).WithAlgorithm(FixedWindow)}, N: -1},
		{Key: "ok3", Limits: []Limit{PerSecond(5).WithAlgorithm(SlidingLog)}, N: 2},
		{Key: "peek", Limits: []Limit{PerSecond(5)}, Kind: KindPeek, N: 1},
	}
	res, err := l.DecideBatch(ctx, reqs)
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T), want a *BatchError", err, err)
	}
	if len(res) != len(reqs) || len(be.Errs) != len(reqs) {
		t.Fatalf("%d results, %d errors for %d requests", len(res), len(be.Errs), len(reqs))
	}
	for i, want := range []error{nil, ErrInvalid, ErrForeignKey, ErrInvalid, ErrInvalid, nil, ErrInvalid} {
		got := be.Errs[i]
		if (want == nil) != (got == nil) || (want != nil && !errors.Is(got, want)) {
			t.Errorf("request %d: error %v, want %v", i, got, want)
		}
		if want == nil && !res[i].Allowed {
			t.Errorf("request %d: %+v, want allowed", i, res[i])
		}
		if want != nil && res[i] != (Result{}) {
			t.Errorf("request %d failed but has a result %+v", i, res[i])
		}
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrForeignKey) {
		t.Errorf("errors.Is does not see through the BatchError: %v", err)
	}
	if got := f.rdb.Get(ctx, "users").Val(); got != "order 42" {
		t.Errorf("user's value became %q", got)
	}
	var rerr *Error
	if !errors.As(be.Errs[2], &rerr) || rerr.Key != "users" || rerr.Script != "gcra" {
		t.Errorf("the foreign key's error %#v does not name the key and script", be.Errs[2])
	}
}

func TestDecideBatchEdges(t *testing.T) {
	ctx := context.Background()
	if _, err := (&Limiter{}).DecideBatch(ctx, nil); !errors.Is(err, ErrNoClient) {
		t.Errorf("zero Limiter: %v, want ErrNoClient", err)
	}
	var nilLimiter *Limiter
	two := []Request{{Key: "a", Limits: []Limit{PerSecond(1)}}, {Key: "b", Limits: []Limit{PerSecond(1)}}}
	if res, err := nilLimiter.DecideBatch(ctx, two); !errors.Is(err, ErrNoClient) || len(res) != 2 {
		t.Errorf("nil Limiter: %d results, %v; want 2 results and ErrNoClient", len(res), err)
	}
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithKeyPrefix("p:"))
	res, err := l.DecideBatch(ctx, nil)
	if err != nil || len(res) != 0 {
		t.Errorf("empty batch: %v %v", res, err)
	}
	if _, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerSecond(1)}, N: 1}}); err != nil {
		t.Fatal(err)
	}
	if f.rdb.Exists(ctx, "p:k").Val() != 1 {
		t.Error("the key prefix was not applied")
	}
	// a dead server: every request fails, with the network error
	addr := f.mr.Addr()
	f.mr.Close()
	l = testLimiter(fastClient(t, addr))
	res, err = l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerSecond(1)}, N: 1}, {Key: "j", Limits: []Limit{PerSecond(1)}, N: 1}})
	var be *BatchError
	if !errors.As(err, &be) || be.Errs[0] == nil || be.Errs[1] == nil || len(res) != 2 {
		t.Fatalf("dead server: %v %v, want two errors", res, err)
	}
}

// plainClient is a client without pipelines.
type plainClient struct{ redis.Scripter }

func TestDecideBatchWithoutPipelines(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(plainClient{f.rdb})
	reqs := []Request{
		{Key: "a", Limits: []Limit{PerMinute(1)}, N: 1},
		{Key: "a", Limits: []Limit{PerMinute(1)}, N: 1},
		{Key: "b", Limits: []Limit{PerMinute(-1)}, N: 1},
	}
	res, err := l.DecideBatch(ctx, reqs)
	var be *BatchError
	if !errors.As(err, &be) || be.Errs[0] != nil || be.Errs[1] != nil || !errors.Is(be.Errs[2], ErrInvalid) {
		t.Fatalf("errors %v", err)
	}
	if !res[0].Allowed || res[1].Allowed || res[1].RetryAfter != time.Minute {
		t.Fatalf("results %+v", res)
	}
}

// TestDecideBatchUsesDenyCache: a pipelined batch's denials are cached and
// answer the next batch, after a Reset (of another key) as before: the batch
// stamps its requests with the cache's count of Resets as single calls do.
func TestDecideBatchUsesDenyCache(t *testing.T) {
	ctx := context.Background()
	_, cnt, l := denyLimiter(t, 10)
	if err := l.Reset(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	lim := []Limit{PerHour(1)}
	reqs := []Request{{Key: "a", Limits: lim, N: 1}, {Key: "a", Limits: lim, N: 1}}
	res, err := l.DecideBatch(ctx, reqs)
	if err != nil || !res[0].Allowed || res[1].Allowed {
		t.Fatalf("%+v %v", res, err)
	}
	before := cnt.scriptCalls()
	res, err = l.DecideBatch(ctx, reqs)
	if err != nil || res[0].Allowed || res[1].Allowed {
		t.Fatalf("%+v %v", res, err)
	}
	if cnt.scriptCalls() != before {
		t.Fatalf("a batch of cached denials sent %d script calls", cnt.scriptCalls()-before)
	}
}
