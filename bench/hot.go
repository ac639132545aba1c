package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// The hot-key mode (-hot, issue 30): 64 goroutines calling Allow on one
// key, through the Limiter (which coalesces the calls it has in flight)
// and through go-redis/redis_rate v10, in alternating rounds on one Redis;
// then, with a limit they exhaust, the admitted count against guarantee 4.

// hotCallers is how many goroutines call at once.
const hotCallers = 64

// hotNever is a limit no caller exhausts in a run: 10^9 per second.
var (
	hotNever     = redisrate.PerSecond(1_000_000_000)
	hotNeverPeer = redis_rate.Limit{Rate: 1_000_000_000, Burst: 1_000_000_000, Period: time.Second}
)

// hotSubject is one way of deciding on the hot key.
type hotSubject struct {
	name string
	call func(ctx context.Context, key string) (bool, error)
}

func hotSubjects(rdb *redis.Client, opts ...redisrate.Option) (ours, peer hotSubject) {
	l := redisrate.NewLimiter(rdb, opts...)
	p := redis_rate.NewLimiter(rdb)
	ours = hotSubject{"redisrate (Limiter.Allow, coalescing)", func(ctx context.Context, key string) (bool, error) {
		r, err := l.Allow(ctx, key, hotNever)
		return r.Allowed, err
	}}
	peer = hotSubject{"redis_rate v10 (Allow)", func(ctx context.Context, key string) (bool, error) {
		r, err := p.Allow(ctx, key, hotNeverPeer)
		return r.Allowed > 0, err
	}}
	return ours, peer
}

// hammer calls call from callers goroutines for d, and counts the
// decisions and admissions; the first error stops the run.
func hammer(ctx context.Context, callers int, d time.Duration, call func(ctx context.Context) (bool, error)) (decided, admitted int64, elapsed time.Duration, err error) {
	var stop atomic.Bool
	var n, ok atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	// The wall clock (Round(0) drops the monotonic reading): the clock of
	// Redis's TIME, which guarantee 4's span is measured on.
	begin := time.Now().Round(0)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				allowed, err := call(ctx)
				if err != nil {
					first.CompareAndSwap(nil, err)
					stop.Store(true)
					return
				}
				n.Add(1)
				if allowed {
					ok.Add(1)
				}
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	if e, _ := first.Load().(error); e != nil {
		return 0, 0, 0, e
	}
	return n.Load(), ok.Load(), time.Now().Round(0).Sub(begin), nil
}

// hotRun is the hot-key mode: its report, or an error when guarantee 4's
// bound is broken.
func hotRun(ctx context.Context, cfg config, addr string, w io.Writer) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: hotCallers, MinIdleConns: hotCallers, Protocol: 2, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		return "", fmt.Errorf("loading the Functions library: %w", err)
	}
	round := 2 * time.Second
	if cfg.short {
		round = 200 * time.Millisecond
	}
	// No decision timeout, as the peer has none: on a machine this loaded,
	// a 200 ms stall of one call would end the run as an outage.
	ours, peer := hotSubjects(rdb, redisrate.WithDecisionTimeout(0))
	var r strings.Builder
	fmt.Fprintf(&r, "### Hot key: %d goroutines calling Allow on one key\n\n", hotCallers)
	rates := [2][]float64{}
	for i := 0; i < 3; i++ {
		subs := [2]hotSubject{ours, peer}
		for j := range subs {
			k := (i + j) % 2 // alternate which goes first
			key := fmt.Sprintf("hot:%d:%d", k, i)
			n, _, el, err := hammer(ctx, hotCallers, round, func(ctx context.Context) (bool, error) { return subs[k].call(ctx, key) })
			if err != nil {
				return "", fmt.Errorf("%s: %w", subs[k].name, err)
			}
			rates[k] = append(rates[k], float64(n)/el.Seconds())
			fmt.Fprintf(w, "hot round %d: %s %.0f decisions/s\n", i+1, subs[k].name, float64(n)/el.Seconds())
		}
	}
	fmt.Fprintf(&r, "A limit they never exhaust (10^9 per second); three rounds of %v each, alternating, on one Redis. Decisions per second:\n\n", round)
	r.WriteString("| subject | round 1 | round 2 | round 3 | median |\n| --- | --- | --- | --- | --- |\n")
	for k, s := range []hotSubject{ours, peer} {
		fmt.Fprintf(&r, "| %s | %s | %s | %s | %s |\n", s.name, thousands(int(rates[k][0])), thousands(int(rates[k][1])), thousands(int(rates[k][2])), thousands(int(median(rates[k]))))
	}
	ratio := median(rates[0]) / median(rates[1])
	fmt.Fprintf(&r, "\nThe Limiter against redis_rate: **%.2f×** (target ≥ 3×: %s). Wall-clock rates on a shared machine are noisy; the ratio is taken between alternating rounds of the same run.\n\n", ratio, yesNo(ratio >= 3))
	bound, err := hotBound(ctx, rdb, round, w)
	if err != nil {
		return "", err
	}
	r.WriteString(bound)
	return r.String(), nil
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// hotBound runs the 64 goroutines on a limit they exhaust, at costs 1 and
// 3, and holds the units admitted to guarantee 4's bound for GCRA over the
// whole run: burst + rate * t / period, t the run's span (which holds
// every admission's TIME), on a key that starts empty.
func hotBound(ctx context.Context, rdb *redis.Client, d time.Duration, w io.Writer) (string, error) {
	lim := redisrate.PerSecond(2000) // a burst of one second: a stall of Redis shorter than that loses no capacity
	l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(0))
	var r strings.Builder
	fmt.Fprintf(&r, "A limit they exhaust (%v, GCRA), for %v from an empty key: the units admitted against guarantee 4's bound, burst + rate × t / period over the run's span t:\n\n", lim, d)
	r.WriteString("| cost | decisions | units admitted | bound | admitted / bound |\n| --- | --- | --- | --- | --- |\n")
	for _, cost := range []int64{1, 3} {
		key := fmt.Sprintf("hot:bound:%d:%d", cost, time.Now().UnixNano())
		n, ok, el, err := hammer(ctx, hotCallers, d, func(ctx context.Context) (bool, error) {
			res, err := l.AllowN(ctx, key, lim, cost)
			return res.Allowed, err
		})
		if err != nil {
			return "", err
		}
		units := ok * cost
		bound := float64(lim.Capacity()) + float64(lim.Rate)*el.Seconds()
		fmt.Fprintf(w, "hot bound, cost %d: %d units admitted in %v, bound %.0f\n", cost, units, el, bound)
		if float64(units) > bound {
			return "", fmt.Errorf("guarantee 4 broken on a hot key: %d units admitted at cost %d in %v, more than burst + rate × t = %.0f", units, cost, el, bound)
		}
		fmt.Fprintf(&r, "| %d | %s | %s | %s | %.3f |\n", cost, thousands(int(n)), thousands(int(units)), thousands(int(bound)), float64(units)/bound)
	}
	return r.String(), nil
}

// hotDrive is the callgrind driver (bench/callgrind.sh): subject ("ours" or
// "peer") on the hot key of the Redis at addr, from 64 goroutines for d;
// it prints the decisions made.
func hotDrive(ctx context.Context, addr, subject string, d time.Duration, w io.Writer) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: hotCallers, Protocol: 2, ContextTimeoutEnabled: true})
	defer rdb.Close()
	// Redis under valgrind is slow: a decision may take far longer than the
	// default decision timeout, which would count as an outage.
	ours, peer := hotSubjects(rdb, redisrate.WithDecisionTimeout(0))
	s := ours
	switch subject {
	case "ours":
	case "peer":
		s = peer
	default:
		return fmt.Errorf("-drive-hot %q: want ours or peer", subject)
	}
	n, _, _, err := hammer(ctx, hotCallers, d, func(ctx context.Context) (bool, error) { return s.call(ctx, "hot") })
	if err != nil {
		return err
	}
	fmt.Fprintln(w, n)
	return nil
}
