package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
)

func TestCallArgsCached(t *testing.T) {
	lims := []Limit{PerSecond(10), PerHour(100).WithBurst(150)}
	a, err := callArgs(2, false, lims)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Args(2, false, lims...)
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Fatalf("callArgs %v, Args %v", a, want)
	}
	b, _ := callArgs(2, false, lims)
	if &a[0] != &b[0] {
		t.Error("the second call formatted the arguments again")
	}
	// Args hands out its own slice: a caller that changes it changes nothing here
	mine, _ := Args(2, false, lims...)
	mine[0] = "999"
	if c, _ := callArgs(2, false, lims); c[0] != "10" {
		t.Errorf("the cached arguments changed: %v", c)
	}
	// another cost, mode or limit is another entry
	for _, other := range []struct {
		n     float64
		check bool
		lims  []Limit
	}{{3, false, lims}, {2, true, lims}, {2, false, lims[:1]}, {2, false, []Limit{PerSecond(10), PerHour(100)}}} {
		c, err := callArgs(other.n, other.check, other.lims)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := Args(other.n, other.check, other.lims...)
		if fmt.Sprint(c) != fmt.Sprint(w) {
			t.Errorf("%v %v %v: %v, want %v", other.n, other.check, other.lims, c, w)
		}
	}
}

func TestCallArgsErrorsAndBounds(t *testing.T) {
	for _, n := range []float64{-1, math.NaN(), math.Inf(1)} {
		for i := 0; i < 2; i++ {
			if _, err := callArgs(n, false, []Limit{PerSecond(1)}); !errors.Is(err, ErrInvalid) {
				t.Errorf("cost %v: %v, want ErrInvalid", n, err)
			}
		}
	}
	if _, err := callArgs(1, false, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("no limits: %v", err)
	}
	if _, err := callArgs(1, false, make([]Limit, 9)); !errors.Is(err, ErrInvalid) {
		t.Errorf("9 limits: %v", err)
	}
	// -0 is 0, formatted "0" (the scripts refuse a sign)
	a, err := callArgs(math.Copysign(0, -1), false, []Limit{PerSecond(1)})
	if err != nil || a[3] != "0" {
		t.Errorf("cost -0: %v %v, want cost \"0\"", a, err)
	}
	f := newFakeRedis(t)
	if _, err := NewLimiter(f.rdb).AllowN(context.Background(), "k", PerSecond(1), math.Copysign(0, -1)); err != nil {
		t.Errorf("AllowN cost -0: %v", err)
	}
	for i := 0; i < 3*maxCachedArgs; i++ {
		if _, err := callArgs(float64(i), false, []Limit{PerSecond(1e9)}); err != nil {
			t.Fatal(err)
		}
	}
	argsCache.RLock()
	n := len(argsCache.m)
	argsCache.RUnlock()
	if n > maxCachedArgs {
		t.Errorf("the cache holds %d entries, more than %d", n, maxCachedArgs)
	}
}

// TestArgsWholeNumbersAsDigits: whole numbers go out as plain digits, which
// the scripts' fast paths take; others keep Go's shortest form.
func TestArgsWholeNumbersAsDigits(t *testing.T) {
	args, err := Args(2e6, false, PerHour(1e6).WithBurst(3e6))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(args); got != "[1000000 3600000 3000000 2000000 ]" {
		t.Errorf("Args: %s", got)
	}
	for v, want := range map[float64]string{0: "0", 2.5: "2.5", 1e-7: "1e-07", 1e15: "1e+15", 999999999999999: "999999999999999"} {
		if got := formatNumber(v); got != want {
			t.Errorf("formatNumber(%v) = %q, want %q", v, got, want)
		}
	}
}
