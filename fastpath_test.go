package redisrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestFastPathsEqualFullScripts runs every script that has a "Fast path"
// section (one limit, whole-number arguments, decided with locals only)
// against the same script without it, on twin keys, with random limits,
// bursts, costs, modes, argument counts and waits: the replies, the stored
// states and their TTLs must be identical.
func TestFastPathsEqualFullScripts(t *testing.T) {
	steps := 600
	if raceEnabled {
		steps = 100
	}
	found := 0
	for a := GCRA; a < numAlgorithms; a++ {
		full := scripts[a].Source
		i := strings.Index(full, "-- ---- Fast path")
		if i < 0 {
			continue
		}
		found++
		j := strings.Index(full[i:], "\n-- -----------------------------------")
		if j < 0 {
			t.Fatalf("%s: the fast path section has no end", a)
		}
		slow := full[:i] + full[i+j+1:]
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, uint64(a)))
			for i := 0; i < steps; i++ {
				lim := []string{"1", "3", "7", "10", "100", "1000000", "007"}[rng.IntN(7)]
				per := []string{"1000", "60000", "1", "250"}[rng.IntN(4)]
				burst := []string{"", "0", "5", "20", lim}[rng.IntN(5)]
				cost := []string{"", "0", "1", "2", "30"}[rng.IntN(5)]
				mode := []string{"", "", "check"}[rng.IntN(3)]
				k := fmt.Sprint(rng.IntN(3))
				args := []any{lim, per, burst, cost, mode}[:2+rng.IntN(4)]
				x, errX := f.rdb.Eval(ctx, full, []string{"fast:" + k}, args...).Result()
				y, errY := f.rdb.Eval(ctx, slow, []string{"full:" + k}, args...).Result()
				if fmt.Sprint(x, errX) != fmt.Sprint(y, errY) {
					t.Fatalf("step %d %q: fast path %v %v, full script %v %v", i, args, x, errX, y, errY)
				}
				if dx, dy := f.dump("fast:"+k), f.dump("full:"+k); dx != dy {
					t.Fatalf("step %d %q: state %s, full script %s", i, args, dx, dy)
				}
				f.advance(time.Duration(rng.IntN(300)) * time.Millisecond)
			}
		})
	}
	if found == 0 {
		t.Skip("no script has a fast path")
	}
}
