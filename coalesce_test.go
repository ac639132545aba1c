package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/hooktest"
)

// gate is a go-redis hook that holds the first command naming key, once
// armed, until released: a call in flight for as long as a test needs, so
// that the calls after it queue behind it.
type gate struct {
	mu   sync.Mutex
	key  string
	held chan struct{} // closed when the held command arrives
	open chan struct{} // closed to let it go
}

// arm makes the next command naming key wait for release.
func (g *gate) arm(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.key, g.held, g.open = key, make(chan struct{}), make(chan struct{})
}

func (g *gate) release() { close(g.open) }

// hold reports the channel to wait on for cmd, disarming the gate.
func (g *gate) hold(cmd redis.Cmder) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.key == "" || !slices.Contains(cmd.Args(), any(g.key)) {
		return nil
	}
	g.key = ""
	close(g.held)
	return g.open
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if open := g.hold(cmd); open != nil {
			<-open
		}
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(g.ProcessHook, next)
}

// queued is how many calls wait behind one in flight on key (prefixed).
func queued(l *Limiter, key string) int {
	n := 0
	for i := range l.hot.shards {
		sh := &l.hot.shards[i]
		sh.mu.Lock()
		if f := sh.inFlight[key]; f != nil {
			n += len(f.queue)
		}
		sh.mu.Unlock()
	}
	return n
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// runGroup makes one call of r in flight on l (held by g), then queues m
// more behind it, one at a time so that their arrival order is their
// index, and lets them go: results[0] is the call alone, 1..m the group.
// before, if not nil, runs just before they go.
func runGroup(t *testing.T, l *Limiter, g *gate, r Request, m int, before func()) ([]Result, []error) {
	t.Helper()
	res, errs := make([]Result, m+1), make([]error, m+1)
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = l.Decide(context.Background(), r)
		}()
	}
	g.arm(l.prefix + r.Key)
	call(0)
	<-g.held
	for i := 1; i <= m; i++ {
		call(i)
		waitFor(t, fmt.Sprintf("call %d to queue", i), func() bool { return queued(l, l.prefix+r.Key) == i })
	}
	if before != nil {
		before()
	}
	g.release()
	wg.Wait()
	return res, errs
}

// randomLimits draws one or two limits of a, with capacities of at least 3.
func randomLimits(rng *rand.Rand, a Algorithm) []Limit {
	periods := []time.Duration{time.Second, 10 * time.Second, time.Minute}
	out := make([]Limit, 1+rng.IntN(2))
	for i := range out {
		lim := Per(3+rng.Int64N(15), periods[rng.IntN(len(periods))]).WithAlgorithm(a)
		if b := lim.WithBurst(lim.Rate + rng.Int64N(6)); b.Validate() == nil {
			lim = b // the buckets take a burst apart from the rate
		}
		out[i] = lim
	}
	return out
}

// TestCoalescingDecidesAsOneByOne holds coalescing to its model, on a
// clock that stands still: the calls of a group are decided as the same
// calls one by one at the same TIME, in arrival order, on a key with the
// same history. Same admitted set, same Remaining, Units, RetryAfter,
// binding limit; a ResetAfter of an admitted call is the key's after the
// group (at least what it would be); and a denial's RetryAfter is honest.
func TestCoalescingDecidesAsOneByOne(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	needV3Mode(t, "upto")
	ctx := context.Background()
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l, solo := testLimiter(f.rdb), testLimiter(f.rdb, WithCoalescing(false))
	rng := rand.New(rand.NewPCG(30, 4))
	rounds := 80
	if raceEnabled {
		rounds = 20
	}
	var admits, denials int // in the groups: the model covers both
	for round := 0; round < rounds; round++ {
		a := Algorithm(round % int(numAlgorithms))
		limits := randomLimits(rng, a)
		c, m := 1+rng.Int64N(3), 2+rng.IntN(8)
		grouped, alone := fmt.Sprintf("g%d", round), fmt.Sprintf("s%d", round)
		for i := rng.IntN(12); i > 0; i-- { // the same history on both keys
			n := 1 + rng.Int64N(3)
			for _, k := range []string{grouped, alone} {
				if _, err := solo.Decide(ctx, Request{Key: k, Limits: limits, N: n}); err != nil {
					t.Fatal(err)
				}
			}
			if rng.IntN(3) == 0 {
				f.advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
			}
		}
		got, errs := runGroup(t, l, g, Request{Key: grouped, Limits: limits, N: c}, m, nil)
		what := fmt.Sprintf("round %d: %v cost %d, %d queued", round, limits, c, m)
		for i := range got {
			want, err := solo.Decide(ctx, Request{Key: alone, Limits: limits, N: c})
			if err != nil || errs[i] != nil {
				t.Fatalf("%s: call %d: %v, %v", what, i, errs[i], err)
			}
			sameDecision(t, fmt.Sprintf("%s: call %d", what, i), got[i], want)
			if i > 0 && got[i].Allowed {
				admits++
			} else if i > 0 {
				denials++
			}
		}
		honestRetry(t, f, solo, Request{Key: grouped, Limits: limits, N: c}, got, what)
	}
	if admits < rounds || denials < rounds {
		t.Errorf("the groups admitted %d calls and denied %d in %d rounds: draw limits that do both", admits, denials, rounds)
	}
}

// sameDecision compares a coalesced decision with the one a call alone got.
func sameDecision(t *testing.T, what string, got, want Result) {
	t.Helper()
	reset := got.ResetAfter == want.ResetAfter || got.Allowed && got.ResetAfter > want.ResetAfter
	got.ResetAfter, want.ResetAfter = 0, 0
	got.Key = want.Key // two keys with the same history
	if got != want || !reset {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// honestRetry: after the RetryAfter of a group's denial, the same call
// alone is admitted.
func honestRetry(t *testing.T, f *fakeRedis, solo *Limiter, r Request, got []Result, what string) {
	t.Helper()
	for _, res := range got {
		if res.Allowed || res.Never() {
			continue
		}
		f.advance(res.RetryAfter)
		again, err := solo.Decide(context.Background(), r)
		if err != nil || !again.Allowed {
			t.Errorf("%s: denied with RetryAfter %v, then %v, %v", what, res.RetryAfter, again, err)
		}
		return
	}
}

// carriedLog is an Observer that keeps each decision's Carried.
type carriedLog struct {
	mu      sync.Mutex
	carried []int
}

func (c *carriedLog) Start(ctx context.Context, _ Decision) context.Context { return ctx }
func (c *carriedLog) End(_ context.Context, d Decision, _ Result, _ error) {
	c.mu.Lock()
	c.carried = append(c.carried, d.Carried)
	c.mu.Unlock()
}

// TestCoalescingRoundTrips: a group is one upto, plus a check for its
// denied calls; an observer sees each decision's share of a round trip;
// WithCoalescing(false) sends each call alone.
func TestCoalescingRoundTrips(t *testing.T) {
	needV3Mode(t, "upto")
	f, g, log := newFakeRedis(t), &gate{}, &cmdLog{}
	f.rdb.AddHook(g)
	obs := &carriedLog{}
	l := testLimiter(f.rdb, WithObserver(obs))
	lim := []Limit{PerHour(5)}
	if _, err := l.Allow(context.Background(), "warm", lim[0]); err != nil { // the script loaded
		t.Fatal(err)
	}
	obs.carried = nil
	f.rdb.AddHook(log)
	res, _ := runGroup(t, l, g, Request{Key: "k", Limits: lim}, 7, nil)
	admitted := 0
	for _, r := range res {
		if r.Allowed {
			admitted++
		}
	}
	slices.Sort(obs.carried)
	if n := log.scriptCalls(); admitted != 5 || n != 3 || !slices.Equal(obs.carried, []int{1, 7, 7, 7, 7, 7, 7, 7}) {
		t.Errorf("8 calls of a limit of 5: %d admitted in %d script calls, carried %v; want 5 in 3 (alone, upto, check), [1 7 ...]", admitted, n, obs.carried)
	}

	off := testLimiter(f.rdb, WithCoalescing(false))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = off.Allow(context.Background(), "off", lim[0])
		}()
	}
	wg.Wait()
	if n := log.scriptCalls(); n != 8 {
		t.Errorf("coalescing off: 8 calls in %d script calls, want 8", n)
	}
}

// TestCoalescingOtherIdentityGoesAlone: while a call is in flight on a
// key, a call of the same key with another cost (or other limits) does
// not wait for it: it goes alone.
func TestCoalescingOtherIdentityGoesAlone(t *testing.T) {
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb)
	l.pipes = nil // not pipelined behind the held call either (TestPipelineOneSendInFlight)
	r := Request{Key: "k", Limits: []Limit{PerHour(10)}}
	g.arm("k")
	held := make(chan error, 1)
	go func() {
		_, err := l.Decide(context.Background(), r)
		held <- err
	}()
	<-g.held
	r.N = 2
	if res, err := l.Decide(context.Background(), r); err != nil || !res.Allowed || res.Remaining != 8 || queued(l, "k") != 0 {
		t.Errorf("a cost of 2 beside a call of 1 in flight: %v, %v; want admitted alone, 8 left", res, err)
	}
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// TestCoalescedDenialCached: the denial of a group that got nothing, at
// a cost of 1, is the deny cache's as a call's own would be.
func TestCoalescedDenialCached(t *testing.T) {
	needV3Mode(t, "upto")
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb, WithDenyCache(8))
	r := Request{Key: "k", Limits: []Limit{PerHour(1)}}
	res, _ := runGroup(t, l, g, r, 3, nil)
	if !res[0].Allowed || res[1].Allowed || res[1].Source != SourceRedis {
		t.Fatalf("one unit, four calls: %v", res)
	}
	again, err := l.Decide(context.Background(), r)
	// The cache counts down from when the group's check was sent: its wait
	// is Redis's less the time since, never more (a loaded machine takes
	// milliseconds between the two).
	if err != nil || again.Allowed || again.Source != SourceDenyCache || again.RetryAfter > res[1].RetryAfter || again.RetryAfter < res[1].RetryAfter-10*time.Second {
		t.Errorf("after the group's denial: %v, %v; want the deny cache's, retry in at most %v", again, err, res[1].RetryAfter)
	}
}

// TestCoalescedCallerLeaves: a queued call whose context ends leaves the
// queue at once with its context's error, and takes nothing.
func TestCoalescedCallerLeaves(t *testing.T) {
	needV3Mode(t, "upto")
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb)
	r := Request{Key: "k", Limits: []Limit{PerHour(10)}}
	res, errs, done := make([]Result, 4), make([]error, 4), make([]chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	call := func(i int, ctx context.Context) {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			res[i], errs[i] = l.Decide(ctx, r)
		}()
	}
	g.arm("k")
	call(0, context.Background())
	<-g.held
	call(1, context.Background())
	waitFor(t, "call 1 to queue", func() bool { return queued(l, "k") == 1 })
	call(2, ctx)
	waitFor(t, "call 2 to queue", func() bool { return queued(l, "k") == 2 })
	cancel()
	<-done[2]
	if q := queued(l, "k"); q != 1 || !errors.Is(errs[2], context.Canceled) || errors.Is(errs[2], ErrUnavailable) {
		t.Errorf("the call that gave up: %v, %d left queued; want context.Canceled, 1", errs[2], q)
	}
	call(3, context.Background())
	waitFor(t, "call 3 to queue", func() bool { return queued(l, "k") == 2 })
	g.release()
	for _, d := range done {
		<-d
	}
	peek, err := l.Decide(context.Background(), Request{Key: "k", Limits: r.Limits, Kind: KindPeek})
	if err != nil || peek.Remaining != 7 || !res[1].Allowed || !res[3].Allowed || res[3].Remaining != 7 {
		t.Errorf("3 calls of 4 stayed: remaining %d (%v), results %v; want 7", peek.Remaining, err, res)
	}
}

// TestCoalescedRedisDown: when Redis cannot decide a group, each of its
// callers gets the failure policy's answer, as a call alone would.
func TestCoalescedRedisDown(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen), WithCircuitBreaker(0), WithDecisionTimeout(2*time.Second))
	// Redis stops before the held call goes: it and the group fail.
	res, errs := runGroup(t, l, g, Request{Key: "k", Limits: []Limit{PerHour(1)}}, 3, f.mr.Close)
	for i := range res {
		if errs[i] != nil || !res[i].Allowed || res[i].Source != SourceFailOpen || !errors.Is(res[i].Cause, ErrUnavailable) {
			t.Errorf("call %d with Redis down under FailOpen: %+v, %v", i, res[i], errs[i])
		}
	}
}

// TestCoalescingConcurrent, under -race: 64 goroutines on one key at a
// TIME that stands still admit exactly the capacity, each Remaining once,
// as one-by-one calls would, however they were grouped.
func TestCoalescingConcurrent(t *testing.T) {
	needV3Mode(t, "upto")
	f := newFakeRedis(t)
	obs := &carriedLog{}
	l := testLimiter(f.rdb, WithObserver(obs))
	for _, c := range []int64{1, 3} {
		key := fmt.Sprintf("hot%d", c)
		lim := PerHour(100)
		var admitted atomic.Int64
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 5; j++ {
					r, err := l.AllowN(context.Background(), key, lim, c)
					if err != nil || (!r.Allowed && r.RetryAfter <= 0) {
						t.Errorf("cost %d: %+v, %v", c, r, err)
						return
					}
					if r.Allowed {
						admitted.Add(c)
						mu.Lock()
						seen[r.Remaining]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if want := 100 - 100%c; admitted.Load() != want || len(seen) != int(want/c) {
			t.Errorf("cost %d: %d units admitted, %d distinct Remaining; want %d, each once", c, admitted.Load(), len(seen), want)
		}
		for rem, n := range seen {
			if n != 1 || rem%c != 100%c {
				t.Errorf("cost %d: Remaining %d seen %d times", c, rem, n)
			}
		}
	}
	if queued(l, "hot1")+queued(l, "hot3") != 0 || len(l.hot.shards[0].inFlight)+len(l.hot.shards[1].inFlight) != 0 {
		t.Error("identities left in flight after every call returned")
	}
}

// holdAll holds every command naming key until open is closed; arrived
// counts them.
type holdAll struct {
	key     string
	open    chan struct{}
	arrived atomic.Int32
}

func (h *holdAll) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdAll) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.Contains(cmd.Args(), any(h.key)) {
			h.arrived.Add(1)
			<-h.open
		}
		return next(ctx, cmd)
	}
}
func (h *holdAll) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(h.ProcessHook, next)
}

// TestCoalescedQueueBoundedByDecisionTimeout: a call queued behind calls
// that Redis does not answer is answered once the call ahead of it has
// timed out and its own group's round trip has had its own decision
// timeout (here by FailError, which says why): never held longer. Without
// the breaker, which would answer the group at once.
func TestCoalescedQueueBoundedByDecisionTimeout(t *testing.T) {
	needV3Mode(t, "upto")
	f, h := newFakeRedis(t), &holdAll{key: "k", open: make(chan struct{})}
	f.rdb.AddHook(h)
	defer close(h.open)
	l := testLimiter(f.rdb, WithCircuitBreaker(0), WithDecisionTimeout(300*time.Millisecond))
	r := Request{Key: "k", Limits: []Limit{PerHour(10)}}
	ahead := make(chan error, 1)
	go func() { _, err := l.Decide(context.Background(), r); ahead <- err }()
	waitFor(t, "the call ahead to reach Redis", func() bool { return h.arrived.Load() == 1 })
	_, err := l.Decide(context.Background(), r) // queued behind it
	var te *timeoutError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) {
		t.Errorf("the queued call: %v; want its group's own decision timeout", err)
	}
	if n := h.arrived.Load(); n != 2 {
		t.Errorf("%d script calls reached Redis; want 2: the call ahead, then the queued one's group", n)
	}
	if err := <-ahead; !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) {
		t.Errorf("the call ahead: %v; want its decision timeout", err)
	}
}
