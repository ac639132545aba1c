package ratefields

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
)

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		limit redisrate.Limit
		q, w  int64
	}{
		{redisrate.PerSecond(10), 10, 1},
		{redisrate.PerSecond(10).WithBurst(20), 20, 2},
		{redisrate.PerSecond(10).WithBurst(25), 10, 1},    // 2.5 s to refill: by the rate
		{redisrate.Per(5, 250*time.Millisecond), 20, 1},   // 5 per 250 ms is 20 per second
		{redisrate.Per(10, 100*time.Millisecond), 100, 1}, // not q=10;w=1
		{redisrate.Per(3, 700*time.Millisecond), 30, 7},   // 7 s hold 10 periods
		{redisrate.Per(5, 1500*time.Millisecond), 10, 3},  //
		{redisrate.PerHour(7).WithBurst(2), 7, 3600},      // 2 refill in 1028.57 s
		{redisrate.PerHour(7), 7, 3600},                   //
		{redisrate.PerDay(1000).WithAlgorithm(redisrate.FixedWindow), 1000, 86400},
		{redisrate.PerMinute(100).WithAlgorithm(redisrate.SlidingWindow), 100, 60},
		{redisrate.Per(10, 100*time.Millisecond).WithAlgorithm(redisrate.SlidingLog), 100, 1},
		{redisrate.PerSecond(10).WithBurst(30).WithAlgorithm(redisrate.TokenBucket), 30, 3},
		{redisrate.PerSecond(10).WithBurst(25).WithAlgorithm(redisrate.TokenBucket), 10, 1}, // not 25 in 3 s: by the rate
		{redisrate.Per(1e15, 1e12*time.Millisecond), 1e15, 1e9},
	} {
		q, w := window(tc.limit)
		if q != tc.q || w != tc.w {
			t.Errorf("%v: q=%d;w=%d; want q=%d;w=%d", tc.limit, q, w, tc.q, tc.w)
		}
	}
}

// t is the time until more quota comes: one unit for the continuous
// buckets, the next refill for the token bucket, full for windows.
func TestNext(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		limit redisrate.Limit
		res   redisrate.Result
		want  time.Duration // 0: no t
	}{
		{"gcra full", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 3, Capacity: 3}, 0},
		{"gcra one used", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 2, Capacity: 3, ResetAfter: 20000 * ms}, 20000 * ms},
		{"gcra three used", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 0, Capacity: 3, ResetAfter: 60000 * ms}, 20000 * ms},
		{"gcra part drained", redisrate.PerMinute(3), redisrate.Result{Allowed: true, Remaining: 1, Capacity: 3, ResetAfter: 35000 * ms}, 15000 * ms},
		{"leaky", redisrate.PerSecond(10).WithAlgorithm(redisrate.LeakyBucket), redisrate.Result{Allowed: true, Remaining: 5, Capacity: 10, ResetAfter: 450 * ms}, 50 * ms},
		{"token bucket next refill", redisrate.PerSecond(10).WithBurst(30).WithAlgorithm(redisrate.TokenBucket),
			redisrate.Result{Allowed: true, Remaining: 5, Capacity: 30, ResetAfter: 2300 * ms}, 300 * ms},
		{"token bucket one refill away", redisrate.PerSecond(10).WithAlgorithm(redisrate.TokenBucket),
			redisrate.Result{Allowed: true, Remaining: 9, Capacity: 10, ResetAfter: 700 * ms}, 700 * ms},
		{"fixed window", redisrate.PerMinute(10).WithAlgorithm(redisrate.FixedWindow),
			redisrate.Result{Allowed: true, Remaining: 5, Capacity: 10, ResetAfter: 42000 * ms}, 42000 * ms},
		{"denied: not past Retry-After", redisrate.PerMinute(10).WithAlgorithm(redisrate.SlidingWindow),
			redisrate.Result{Remaining: 0, Capacity: 10, RetryAfter: 3000 * ms, ResetAfter: 90000 * ms}, 3000 * ms},
		{"never", redisrate.PerMinute(3), redisrate.Result{Remaining: 3, Capacity: 3, RetryAfter: redisrate.InfDuration}, 0},
	} {
		got, ok := next(tc.limit, tc.res)
		if !ok {
			got = 0
		}
		if got != tc.want {
			t.Errorf("%s: next = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

func TestSet(t *testing.T) {
	s, err := New([]string{"a", `b"`}, []redisrate.Limit{redisrate.PerSecond(2), redisrate.PerMinute(3)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Policy(), `"a";q=2;w=1, "b\"";q=3;w=60`; got != want {
		t.Errorf("Policy = %s; want %s", got, want)
	}
	if got, want := s.RateLimit(redisrate.Result{Allowed: true, Binding: 1, Remaining: 1, Capacity: 3, ResetAfter: 40 * time.Second}), `"b\"";r=1;t=20`; got != want {
		t.Errorf("RateLimit = %s; want %s", got, want)
	}
	if s.Name(1) != `b"` {
		t.Errorf("Name(1) = %q", s.Name(1))
	}
	for _, names := range [][]string{{"a"}, {"a", "a"}, {"a", ""}, {"a", "\x7f"}} {
		if _, err := New(names, []redisrate.Limit{redisrate.PerSecond(2), redisrate.PerMinute(3)}); err == nil {
			t.Errorf("New(%q) accepted", names)
		}
	}
	if c := CeilSeconds(time.Second + 1); c != 2 {
		t.Errorf("CeilSeconds(1s+1ns) = %d", c)
	}
}

// The zero Set has no limits and names none: its fields are empty, and no
// method panics, nor Name out of range.
func TestZeroSet(t *testing.T) {
	var s Set
	res := redisrate.Result{Allowed: true, Remaining: 1, Capacity: 2, ResetAfter: time.Second}
	if s.Policy() != "" || s.RateLimit(res) != "" || s.Name(0) != "" {
		t.Errorf("zero Set: Policy %q, RateLimit %q, Name(0) %q; want all empty", s.Policy(), s.RateLimit(res), s.Name(0))
	}
	one, err := New([]string{"a"}, []redisrate.Limit{redisrate.PerSecond(2)})
	if err != nil {
		t.Fatal(err)
	}
	if one.Name(-1) != "" || one.Name(1) != "" {
		t.Errorf("Name out of range: %q, %q; want empty", one.Name(-1), one.Name(1))
	}
}

// TestScopedKeys: whatever clients send, the keys of a request all start
// with the account's hash tag, and a key names one thing only: the own key
// one (account, key), the API key's one (account, API key), the account's
// one account.
func TestScopedKeys(t *testing.T) {
	hostile := []string{"", "x", "x}", "x}:a:k", "%", "%7D", "}", "{", "{}", "a:b", "x}{y", "plan", "key"}
	seen := map[string]string{}
	for _, apiKey := range hostile {
		for _, account := range hostile {
			for _, key := range hostile {
				keys, err := ScopedKeys("api", "plan", key, []string{"key", "account"}, []string{apiKey, account})
				if err != nil || len(keys) != 3 {
					t.Fatalf("%d keys, %v", len(keys), err)
				}
				tag := keys[2]
				for i, names := range []string{"own " + key + " of " + account, "api key " + apiKey + " of " + account, "account " + account} {
					k := keys[i]
					if !strings.HasPrefix(k, "{") || k[:strings.IndexByte(k, '}')+1] != tag {
						t.Errorf("%s is %q: its hash tag is not %q", names, k, tag)
					}
					if other, ok := seen[k]; ok && other != names {
						t.Errorf("%s and %s are both %q", names, other, k)
					}
					seen[k] = names
				}
			}
		}
	}
}

// TestScopedKeysRefusesWhatCouldMeet: names that would let keys meet, and
// scopes without values, are errors, not keys.
func TestScopedKeysRefusesWhatCouldMeet(t *testing.T) {
	for _, tc := range []struct {
		name, segment string
		scopes        []string
		values        []string
	}{
		{"api", "plan", nil, nil},
		{"api", "plan", []string{"account"}, []string{"1", "2"}},
		{"a:b", "plan", []string{"account"}, []string{"1"}},
		{"api", "pl{an", []string{"account"}, []string{"1"}},
		{"api", "plan", []string{"acc}ount"}, []string{"1"}},
		{"api", "", []string{"account"}, []string{"1"}},
		{"api", "plan", []string{"plan"}, []string{"1"}},
		{"api", "plan", []string{"key", "key", "account"}, []string{"1", "2", "3"}},
	} {
		if keys, err := ScopedKeys(tc.name, tc.segment, "k", tc.scopes, tc.values); err == nil {
			t.Errorf("%q %q %q %q: %q, want an error", tc.name, tc.segment, tc.scopes, tc.values, keys)
		}
	}
}

// Only the caller's context ending is the caller giving up: Redis failing
// (ErrUnavailable), even on a deadline of its own, is not.
func TestCallerGaveUp(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, true},
		{fmt.Errorf("gcra client:42: %w before Redis decided", context.DeadlineExceeded), true},
		{fmt.Errorf("%w: %w", redisrate.ErrUnavailable, context.DeadlineExceeded), false},
		{redisrate.ErrUnavailable, false},
		{errors.New("no key"), false},
	} {
		if got := CallerGaveUp(tc.err); got != tc.want {
			t.Errorf("CallerGaveUp(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// NewScopes keeps what it was given, changes nothing of its caller's, and
// its zero value adds nothing.
func TestScopes(t *testing.T) {
	names, limits := []string{"account"}, []redisrate.Limit{redisrate.PerMinute(3)}
	taken := map[string]string{"api": "Config.Name"}
	s, err := NewScopes("call", names, limits, taken)
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 1 {
		t.Errorf("NewScopes changed taken: %v", taken)
	}
	names[0], limits[0] = "changed", redisrate.PerHour(1)
	gotNames, gotLimits, err := s.add("api", nil, []redisrate.Limit{redisrate.PerSecond(2)})
	if err != nil || strings.Join(gotNames, ",") != "api,account" || len(gotLimits) != 2 || gotLimits[1] != redisrate.PerMinute(3) {
		t.Errorf("add: %q, %v, %v; want api,account with the scope's limit as given", gotNames, gotLimits, err)
	}
	gotNames[1] = "changed" // the caller's to change
	if again, _, _ := s.add("api", []string{"own"}, []redisrate.Limit{redisrate.PerSecond(2)}); strings.Join(again, ",") != "own,account" {
		t.Errorf("add after a change to an earlier answer: %q; want own,account", again)
	}

	own := []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(9)}
	if n, l, err := (Scopes{}).add("api", nil, own); n != nil || len(l) != 2 || err != nil {
		t.Errorf("zero Scopes: %q, %v, %v; want the limits as they are", n, l, err)
	}
	if s, err := NewScopes("call", nil, nil, nil); err != nil || len(s.names) != 0 || s.unit != "call" {
		t.Errorf("no scopes: %+v, %v; want none, in calls", s, err)
	}

	seven := make([]string, 8)
	for i := range seven {
		seven[i] = fmt.Sprint("s", i)
	}
	for _, tc := range []struct {
		names  []string
		limits []redisrate.Limit
		taken  map[string]string
		want   string
	}{
		{[]string{"a", "b"}, limits[:1], nil, "2 scope names for 1 limits"},
		{seven, repeat(limits[0], 8), nil, "Config.Scopes has 8 scopes: at most 7, for 8 keys in one call with the call's own"},
		{[]string{"a", "a"}, repeat(limits[0], 2), nil, `Config.Scopes[1] has the Name "a" of Config.Scopes[0]`},
		{[]string{"a"}, limits[:1], map[string]string{"a": `the method "a"`}, `Config.Scopes[0] has the Name "a" of the method "a"`},
		{[]string{"a}"}, limits[:1], nil, `invalid Config.Scopes[0].Name "a}": '{' and '}'`},
		{[]string{"é"}, limits[:1], nil, "Config.Scopes[0]: invalid Name: policy name"},
		{[]string{"a"}, []redisrate.Limit{{Period: time.Second}}, nil, `Config.Scopes[0] ("a"): invalid Limit`},
	} {
		if _, err := NewScopes("call", tc.names, tc.limits, tc.taken); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewScopes(%q): %v; want an error with %q", tc.names, err, tc.want)
		}
	}
	if _, err := NewScopes("call", seven[:7], repeat(limits[0], 7), nil); err != nil {
		t.Errorf("7 scopes: %v; want them taken", err)
	}
	for _, tc := range []struct {
		names  []string
		limits []redisrate.Limit
		want   string
	}{
		{nil, own, "2 limits with Config.Scopes"},
		{[]string{"a", "b"}, own[:1], "PolicyNames has 2 names for 1 limit"},
		{nil, []redisrate.Limit{redisrate.PerSecond(1).WithAlgorithm(redisrate.SlidingLog)}, `Config.Scopes[0] ("account") has a gcra limit, and the call's own is sliding_log`},
	} {
		if _, _, err := s.add("api", tc.names, tc.limits); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add(%q, %v): %v; want an error with %q", tc.names, tc.limits, err, tc.want)
		}
	}
}

// NewSet names a rule's limits as both middleware do, for the fields and
// for metrics, adds the scopes' limits, and refuses what could never
// serve.
func TestNewSet(t *testing.T) {
	two := []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(9)}
	for _, tc := range []struct {
		names  []string
		limits []redisrate.Limit
		want   string // the policy names, as the limits' Names too
	}{
		{nil, two[:1], "api"},
		{nil, two, "api-1,api-2"},
		{[]string{"burst", "hourly"}, two, "burst,hourly"},
	} {
		f, err := Scopes{}.NewSet("api", tc.names, tc.limits)
		if err != nil {
			t.Fatalf("%q: %v", tc.names, err)
		}
		var got []string
		for i, l := range f.Limits {
			if l.Name != f.Name(i) {
				t.Errorf("%q: limit %d named %q in metrics, %q in the fields", tc.names, i, l.Name, f.Name(i))
			}
			got = append(got, l.Name)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%q: names %q; want %s", tc.names, got, tc.want)
		}
	}
	if two[0].Name != "" {
		t.Errorf("NewSet named the caller's limit: %q", two[0].Name)
	}

	scopes, err := NewScopes("call", []string{"account"}, []redisrate.Limit{redisrate.PerMinute(100)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := scopes.NewSet("api", nil, two[:1])
	if err != nil || f.Policy() != `"api";q=1;w=1, "account";q=100;w=60` || f.Limits[1].Name != "account" {
		t.Errorf("with a scope: %v, %v; want the own limit, then the account's", f, err)
	}

	none, err := NewScopes("call", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scopes Scopes
		names  []string
		limits []redisrate.Limit
		want   string
	}{
		{none, nil, nil, "no limits: give at least one"},
		{none, []string{"a"}, two, "PolicyNames has 1 names for 2 limits"},
		{none, []string{"a", "a"}, two, `PolicyNames: policy name "a" twice`},
		{none, nil, []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerSecond(1).WithAlgorithm(redisrate.FixedWindow)}, "algorithm"},
		{none, nil, []redisrate.Limit{redisrate.PerSecond(1).WithBurst(-1)}, "invalid burst '-1'"},
		{scopes, nil, two, "2 limits with Config.Scopes"},
	} {
		if _, err := tc.scopes.NewSet("api", tc.names, tc.limits); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSet(%q, %v): %v; want an error with %q", tc.names, tc.limits, err, tc.want)
		}
	}
	if _, err := (Scopes{}).NewSet("api", nil, []redisrate.Limit{redisrate.PerSecond(0)}); !errors.Is(err, redisrate.ErrInvalid) {
		t.Errorf("an invalid limit: %v; want an error matching ErrInvalid", err)
	}
}

// repeat is n copies of l (slices.Repeat, which Go 1.22 lacks).
func repeat(l redisrate.Limit, n int) []redisrate.Limit {
	out := make([]redisrate.Limit, n)
	for i := range out {
		out[i] = l
	}
	return out
}
