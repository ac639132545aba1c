package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Several keys in one call (issue 21, contract v2.1 "Several keys").

// userOrg is the KeyLimits of user u of organisation 7: the user's limit,
// then the organisation's.
func userOrg(u string, user, org Limit) []KeyLimit {
	return []KeyLimit{{Key: "{org:7}:user:" + u, Limit: user}, {Key: "{org:7}", Limit: org}}
}

// TestDecideKeysBinding: the Result names the binding key and limit, by the
// user when the user's limit binds and by the organisation when its does,
// on admissions and denials.
func TestDecideKeysBinding(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
	user, org := PerMinute(3).WithName("user"), PerMinute(5).WithName("org")
	want := func(what string, r Result, err error, allowed bool, binding int, key string) {
		t.Helper()
		if err != nil || r.Allowed != allowed || r.Binding != binding || r.Key != key || r.Limit != []Limit{user, org}[binding] {
			t.Fatalf("%s: %+v %v, want allowed %v, binding %d on %q", what, r, err, allowed, binding, key)
		}
	}
	r, err := l.Decide(ctx, Request{Keys: userOrg("a", user, org)})
	want("a's first", r, err, true, 0, "{org:7}:user:a") // 2 of 3 left for a, 4 of 5 for the org
	r, err = l.Decide(ctx, Request{Keys: userOrg("a", user, org), N: 2})
	want("a's two more", r, err, true, 0, "{org:7}:user:a")
	r, err = l.Decide(ctx, Request{Keys: userOrg("a", user, org)})
	want("a's fourth", r, err, false, 0, "{org:7}:user:a")
	r, err = l.Decide(ctx, Request{Keys: userOrg("b", user, org)})
	want("b's first", r, err, true, 1, "{org:7}") // 2 left for b, 1 for the org
	if r.Remaining != 1 {
		t.Errorf("b's first: %d left, want the organisation's 1", r.Remaining)
	}
	r, err = l.Decide(ctx, Request{Keys: userOrg("c", user, org), N: 2})
	want("c's two", r, err, false, 1, "{org:7}")
	r, err = l.Decide(ctx, Request{Kind: KindCheck, Keys: userOrg("c", user, org)})
	want("c's check", r, err, true, 1, "{org:7}")
	r, err = l.Decide(ctx, Request{Kind: KindPeek, Keys: userOrg("c", user, org)})
	want("c's peek", r, err, true, 1, "{org:7}")
	if r.Remaining != 1 || !strings.HasPrefix(r.String(), "peek:") {
		t.Errorf("peek: %v, want the organisation's 1 left", r)
	}
	// The organisation's key, called alone, has the state the calls left.
	if r, err := l.AllowN(ctx, "{org:7}", org, 1); err != nil || !r.Allowed || r.Remaining != 0 || r.Key != "{org:7}" {
		t.Errorf("the organisation alone: %+v %v, want its last unit", r, err)
	}
	if r, err := l.Allow(ctx, "{org:7}", org); err != nil || r.Allowed {
		t.Errorf("the organisation alone, past its 5: %+v %v, want denied", r, err)
	}
	f.advance(12 * time.Second) // one unit back for the org
	r, err = l.Decide(ctx, Request{Keys: userOrg("c", user, org)})
	want("c, a unit later", r, err, true, 1, "{org:7}")
}

// TestDecideKeysDenialWritesNothing: a call denied by either key's limit,
// whichever is first, writes nothing on either key: value and TTL alike;
// nor does a check or a peek.
func TestDecideKeysDenialWritesNothing(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiter(f.rdb)
			user, org := PerMinute(2).WithAlgorithm(a), PerMinute(3).WithAlgorithm(a)
			u1, u2, o := "{org:7}:user:1", "{org:7}:user:2", "{org:7}"
			for range 2 {
				if r, err := l.Decide(ctx, Request{Keys: userOrg("1", user, org)}); err != nil || !r.Allowed {
					t.Fatalf("u1: %+v %v, want admitted", r, err)
				}
			}
			f.advance(time.Second) // so that a write would change a TTL
			denied := func(what string, keys []KeyLimit, binding int) {
				t.Helper()
				before := []string{f.dump(u1), f.dump(u2), f.dump(o)}
				r, err := l.Decide(ctx, Request{Keys: keys})
				if err != nil || r.Allowed || r.Binding != binding || r.Key != keys[binding].Key {
					t.Fatalf("%s: %+v %v, want denied by key #%d", what, r, err, binding+1)
				}
				if _, err := l.Decide(ctx, Request{Kind: KindCheck, Keys: keys}); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Decide(ctx, Request{Kind: KindPeek, Keys: keys}); err != nil {
					t.Fatal(err)
				}
				if after := []string{f.dump(u1), f.dump(u2), f.dump(o)}; fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s wrote:\n  before %q\n  after  %q", what, before, after)
				}
			}
			uo := userOrg("1", user, org)
			denied("denied by the user's limit", uo, 0)
			denied("denied by the user's limit, the organisation first", []KeyLimit{uo[1], uo[0]}, 1)
			if r, err := l.Decide(ctx, Request{Keys: userOrg("2", user, org)}); err != nil || !r.Allowed {
				t.Fatalf("u2 takes the organisation's last: %+v %v", r, err)
			}
			denied("denied by the organisation's limit, u2 has never been called before", userOrg("3", user, org), 1)
			denied("denied by the organisation's limit", userOrg("2", user, org), 1)
			if n := f.rdb.Exists(ctx, "{org:7}:user:3").Val(); n != 0 {
				t.Errorf("a denied call created its new user's key")
			}
		})
	}
}

// TestDecideKeysSharedOrganisation: many users' calls share the
// organisation's key, which is also called alone with its limit: its state
// is one, and the users' are each their own.
func TestDecideKeysSharedOrganisation(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
			user, org := PerHour(3).WithAlgorithm(a), PerHour(20).WithAlgorithm(a)
			admitted := map[string]int{}
			total := 0
			for round := range 5 {
				for u := range 10 {
					name := fmt.Sprint(u)
					r, err := l.Decide(ctx, Request{Keys: userOrg(name, user, org)})
					if err != nil {
						t.Fatal(err)
					}
					if r.Allowed {
						admitted[name]++
						total++
					}
				}
				if round == 0 { // the organisation's own work, alone
					r, err := l.AllowN(ctx, "{org:7}", org, 4)
					if err != nil || !r.Allowed || r.Remaining != 20-10-4 {
						t.Fatalf("the organisation alone: %+v %v, want 6 left", r, err)
					}
				}
			}
			// 3 each for the first users, until the organisation's 20 - 4 are gone
			if total != 16 {
				t.Errorf("users admitted %d in all, want the organisation's 16 left after its own 4", total)
			}
			for u, n := range admitted {
				if n > 3 {
					t.Errorf("user %s admitted %d times, over its 3", u, n)
				}
			}
			for u := range 10 {
				name := fmt.Sprint(u)
				r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "{org:7}:user:" + name, Limits: []Limit{user}})
				if err != nil || r.Remaining != 3-int64(admitted[name]) {
					t.Errorf("user %s: %+v %v, want %d left after %d admitted", name, r, err, 3-admitted[name], admitted[name])
				}
			}
			if r, err := l.Allow(ctx, "{org:7}", org); err != nil || r.Allowed || r.Key != "{org:7}" {
				t.Errorf("the organisation alone, spent: %+v %v, want denied", r, err)
			}
		})
	}
}

// TestDecideKeysForeignKey: a foreign value on key 2 gets an error naming key
// #2, and nothing is written on key 1, new or holding state; on key 1, key 1.
func TestDecideKeysForeignKey(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
			user, org := PerMinute(5).WithAlgorithm(a), PerMinute(50).WithAlgorithm(a)
			if err := f.rdb.Set(ctx, "rate:{org:7}", "not a limiter's", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Allow(ctx, "{org:7}:user:old", user); err != nil {
				t.Fatal(err)
			}
			f.advance(time.Second)
			for _, u := range []string{"new", "old"} {
				before := f.dump("rate:{org:7}:user:" + u)
				_, err := l.Decide(ctx, Request{Keys: userOrg(u, user, org)})
				var e *Error
				if !errors.Is(err, ErrForeignKey) || errors.Is(err, ErrUnavailable) || !errors.As(err, &e) || e.Key != "rate:{org:7}" ||
					!strings.Contains(err.Error(), "key #2") {
					t.Fatalf("user %s: %v (%#v), want ErrForeignKey naming key #2, rate:{org:7}", u, err, e)
				}
				if after := f.dump("rate:{org:7}:user:" + u); after != before {
					t.Errorf("user %s: key 1 written: %s, then %s", u, before, after)
				}
			}
			_, err := l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{"{org:7}", org}, KeyLimit{"{org:7}:user:old", user}}})
			var e *Error
			if !errors.Is(err, ErrForeignKey) || !errors.As(err, &e) || e.Key != "rate:{org:7}" {
				t.Fatalf("foreign key first: %v, want ErrForeignKey naming rate:{org:7}", err)
			}
			if got := f.rdb.Get(ctx, "rate:{org:7}").Val(); got != "not a limiter's" {
				t.Errorf("the foreign value became %q", got)
			}
		})
	}
}

// TestDecideKeysInvalid: a call of several keys is refused before any round
// trip, with words naming what is wrong and where, as the scripts word it
// (an empty key is the client's own rule: the scripts take any key).
func TestDecideKeysInvalid(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
	lim := PerSecond(10)
	kl := func(keys ...string) []KeyLimit {
		out := make([]KeyLimit, len(keys))
		for i, k := range keys {
			out[i] = KeyLimit{Key: k, Limit: lim}
		}
		return out
	}
	nine := kl("1", "2", "3", "4", "5", "6", "7", "8", "9")
	for _, tc := range []struct {
		name string
		call func() (Result, error)
		want string
	}{
		{"no key", func() (Result, error) { return l.Decide(ctx, Request{N: 1}) }, "neither Limits nor Keys given"},
		{"no key, peek", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindPeek}) }, "neither Limits nor Keys given"},
		{"nine keys", func() (Result, error) { return l.Decide(ctx, Request{Keys: nine}) }, "invalid numkeys '9': must be at most 8"},
		{"empty key", func() (Result, error) { return l.Decide(ctx, Request{Keys: kl("a", "b", "")}) }, "invalid key #3 '': must not be empty"},
		{"same key", func() (Result, error) { return l.Decide(ctx, Request{Keys: kl("a", "b", "a")}) }, "invalid key #3 'a': must differ from key #1"},
		{"same key, check", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindCheck, Keys: kl("a", "b", "b")}) }, "invalid key #3 'b': must differ from key #2"},
		{"two algorithms", func() (Result, error) {
			return l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{"a", lim}, KeyLimit{"b", lim.WithAlgorithm(TokenBucket)}}})
		}, "invalid algorithm #2 'token_bucket' (key #2 'b'): must be key #1's, gcra"},
		{"bad limit", func() (Result, error) {
			return l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{"a", lim}, KeyLimit{"b", Per(0, time.Second)}}})
		}, "invalid limit #2 '0'"},
		{"refund of 0", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindRefund, Keys: kl("a", "b")}) }, "invalid cost '0'"},
		{"negative cost", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindCheck, Keys: kl("a", "b"), N: -1}) }, "invalid cost '-1'"},
	} {
		r, err := tc.call()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || r != (Result{}) {
			t.Errorf("%s: %+v %v, want ErrInvalid saying %q", tc.name, r, err, tc.want)
		}
	}
	if n := cnt.scriptCalls(); n != 0 {
		t.Errorf("refused calls sent %d script calls", n)
	}
	// One key is a plain one-key call: its script's one-key path, no
	// rule of several keys.
	log := &argLog{}
	f.rdb.AddHook(log)
	if r, err := l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{"solo", lim}}, N: 2}); err != nil || !r.Allowed || r.Key != "solo" || r.Remaining != 8 {
		t.Fatalf("one KeyLimit: %+v %v", r, err)
	}
	var sha []string
	for _, c := range log.take() {
		if strings.HasPrefix(c, "evalsha ") {
			sha = append(sha, c)
		}
	}
	if len(sha) != 1 || !strings.HasSuffix(sha[0], " 1 rate:solo 10 1000  2") {
		t.Errorf("one KeyLimit sent %q, want AllowN's command", sha)
	}
}

// keysRun is a run of concurrent calls of several keys: 64 goroutines
// call for 50 users of one organisation, and what each user and the
// organisation were admitted is counted by the callers.
type keysRun struct {
	perUser  []int64
	total    int64
	attempts int64
}

// runUsers makes calls calls of Decide with Keys for 50 users of organisation 7
// from 64 goroutines, the users in an order of their own for each.
func runUsers(ctx context.Context, l *Limiter, user, org Limit, calls int) (keysRun, error) {
	const users, workers = 50, 64
	var mu sync.Mutex
	run := keysRun{perUser: make([]int64, users)}
	var wg sync.WaitGroup
	var firstErr error
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls / workers {
				u := (w*7 + i*13) % users
				r, err := l.Decide(ctx, Request{Keys: userOrg(fmt.Sprint(u), user, org)})
				mu.Lock()
				run.attempts++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil && r.Allowed {
					run.perUser[u]++
					run.total++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return run, firstErr
}

// TestDecideKeysConcurrentGuarantee4: guarantee 4 per key under
// concurrency. 64 goroutines, 50 users of one organisation, every user
// asking more than its limit and all of them more than the organisation's:
// no user is admitted past its limit, the organisation exactly its limit,
// and the state Redis holds says the same (all or nothing: a denial took
// nothing from a user's key, nor from the organisation's). The limits are
// per day, so that the clock does not matter.
func TestDecideKeysConcurrentGuarantee4(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			// A starved machine must not turn into ErrUnavailable: a
			// connection for each goroutine (no pool wait), no read
			// timeout, a decision timeout no scheduler delay reaches.
			rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), Protocol: 2, PoolSize: 64, ReadTimeout: -1, WriteTimeout: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			l := testLimiter(rdb, WithKeyPrefix("rate:"), WithDecisionTimeout(time.Hour))
			user, org := PerDay(5).WithAlgorithm(a), PerDay(200).WithAlgorithm(a)
			run, err := runUsers(ctx, l, user, org, 64*25)
			if err != nil {
				t.Fatal(err)
			}
			checkUsersRun(t, ctx, l, run, user, org)
		})
	}
}

// checkUsersRun asserts guarantee 4 on a run and on the state it left.
func checkUsersRun(t *testing.T, ctx context.Context, l *Limiter, run keysRun, user, org Limit) {
	t.Helper()
	var sum int64
	for u, n := range run.perUser {
		sum += n
		if n > user.Rate {
			t.Errorf("user %d admitted %d times, over its %d", u, n, user.Rate)
		}
		r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "{org:7}:user:" + fmt.Sprint(u), Limits: []Limit{user}})
		if err != nil || r.Remaining != user.Rate-n {
			t.Errorf("user %d: %v %v, want %d left after %d admitted", u, r, err, user.Rate-n, n)
		}
	}
	if run.total != org.Rate || sum != run.total {
		t.Errorf("%d attempts admitted %d in all (users' sum %d), want exactly the organisation's %d", run.attempts, run.total, sum, org.Rate)
	}
	if r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "{org:7}", Limits: []Limit{org}}); err != nil || r.Remaining != 0 {
		t.Errorf("the organisation: %v %v, want spent", r, err)
	}
}

// TestDecideBatchKeys: requests of several keys in a batch, among one-key
// requests, answer exactly as the single calls do, each with its Key and
// Binding; a request of one KeyLimit is a one-key request; a request that
// gives both forms or neither, or both Check and Peek, is refused, naming
// the fields, and the others are decided.
func TestDecideBatchKeys(t *testing.T) {
	ctx := context.Background()
	fb, fs := newFakeRedis(t), newFakeRedis(t)
	cnt := countCommands(fb.rdb)
	lb, ls := testLimiter(fb.rdb, WithKeyPrefix("p:")), testLimiter(fs.rdb, WithKeyPrefix("p:"))
	user, org := PerMinute(2), PerMinute(3)
	reqs := []Request{
		{Key: "{org:7}", Limits: []Limit{org}, N: 2},             // the organisation alone: 1 left
		{Keys: userOrg("a", user, org)},                          // a: 1 left, org 0: binds
		{Keys: userOrg("a", user, org), Kind: KindCheck},         // would be denied by the org
		{Keys: userOrg("b", user, org), N: 2},                    // denied by the org
		{Keys: userOrg("b", user, org), Kind: KindPeek},          // b is full, the org spent
		{Keys: []KeyLimit{{Key: "{org:7}:user:c", Limit: user}}}, // one key
		{Key: "x", Limits: []Limit{user}, Keys: userOrg("a", user, org)},
		{Key: "x"},
		{Key: "x", Limits: []Limit{user}, Kind: KindPeek, N: 2},
	}
	got, err := lb.DecideBatch(ctx, reqs)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(reqs) {
		t.Fatalf("batch: %v, want a BatchError for the three malformed requests", err)
	}
	for i, want := range []string{"invalid request: both Keys and Key/Limits given", "invalid request: neither Limits nor Keys given", "invalid cost '2': a peek takes nothing"} {
		if e := be.Errs[6+i]; !errors.Is(e, ErrInvalid) || !strings.Contains(e.Error(), want) {
			t.Errorf("request %d: %v, want %q", 6+i, e, want)
		}
	}
	wantBinding := []struct {
		binding int
		key     string
	}{{0, "{org:7}"}, {1, "{org:7}"}, {1, "{org:7}"}, {1, "{org:7}"}, {1, "{org:7}"}, {0, "{org:7}:user:c"}}
	for i, r := range reqs[:6] {
		if be.Errs[i] != nil {
			t.Fatalf("request %d: %v", i, be.Errs[i])
		}
		var want Result
		var err error
		switch {
		case r.Keys == nil:
			want, err = ls.Decide(ctx, Request{Key: r.Key, Limits: r.Limits, N: max(r.N, 1)})
		default:
			want, err = ls.Decide(ctx, Request{Kind: r.Kind, Keys: r.Keys, N: r.N})
		}
		if err != nil || got[i] != want {
			t.Errorf("request %d: batch %+v, single %+v %v", i, got[i], want, err)
		}
		if got[i].Binding != wantBinding[i].binding || got[i].Key != wantBinding[i].key {
			t.Errorf("request %d: binding %d on %q, want %d on %q", i, got[i].Binding, got[i].Key, wantBinding[i].binding, wantBinding[i].key)
		}
	}
	if !got[1].Allowed || got[2].Allowed || got[3].Allowed || got[4].Remaining != 0 {
		t.Errorf("batch results %+v", got[:5])
	}
	for _, k := range []string{"p:{org:7}", "p:{org:7}:user:a", "p:{org:7}:user:b", "p:{org:7}:user:c"} {
		if b, s := fb.dump(k), fs.dump(k); b != s {
			t.Errorf("%s: batch left %s, single calls %s", k, b, s)
		}
	}
	if len(cnt.pipes) == 0 || len(cnt.pipes[len(cnt.pipes)-1]) != 6 {
		t.Errorf("pipelines %v: want the six requests in one", cnt.pipes)
	}
}

// TestDenyCacheSeveralKeys: a denial of several keys is answered again
// from the cache for the same keys, limits and cost only, and never once a
// Reset of any one of its keys, or an admission this Limiter took on any
// one of them, may have changed Redis's answer.
func TestDenyCacheSeveralKeys(t *testing.T) {
	ctx := context.Background()
	user, org := PerHour(2), PerHour(3)
	for _, tc := range []struct {
		name    string
		deniedU string // the user whose call is denied, binding key #binding
		binding int
		then    func(l *Limiter) // what comes between the cached denial and the next call
		cached  bool             // whether the next call is still answered from the cache
	}{
		{"nothing between", "a", 0, func(*Limiter) {}, true},
		{"the user's key reset", "a", 0, func(l *Limiter) { _ = l.Reset(ctx, "{org:7}:user:a") }, false},
		{"the organisation's key reset", "b", 1, func(l *Limiter) { _ = l.Reset(ctx, "{org:7}") }, false},
		{"the organisation's key reset, the user binding", "a", 0, func(l *Limiter) { _ = l.Reset(ctx, "{org:7}") }, false},
		{"another user's key reset", "b", 1, func(l *Limiter) { _ = l.Reset(ctx, "{org:7}:user:z") }, true},
		{"units taken on the organisation alone", "b", 1, func(l *Limiter) {
			_ = l.Reset(ctx, "{org:7}") // to have a unit to take; and then
			_, _ = l.Allow(ctx, "{org:7}", org)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cnt, l := denyLimiter(t, 100, WithKeyPrefix("rate:"))
			// a takes its 2 and 2 of the organisation's 3; c takes the last
			for _, u := range []string{"a", "a", "c"} {
				if r, err := l.Decide(ctx, Request{Keys: userOrg(u, user, org)}); err != nil || !r.Allowed {
					t.Fatalf("%s: %v %v", u, r, err)
				}
			}
			keys := userOrg(tc.deniedU, user, org)
			first, err := l.Decide(ctx, Request{Keys: keys})
			if err != nil || first.Allowed || first.Binding != tc.binding || first.Source != SourceRedis {
				t.Fatalf("%s: %+v %v, want denied by key #%d", tc.deniedU, first, err, tc.binding+1)
			}
			before := cnt.scriptCalls()
			r, err := l.Decide(ctx, Request{Keys: keys})
			if err != nil || r.Allowed || r.Source != SourceDenyCache || r.Key != keys[tc.binding].Key || r.Binding != tc.binding {
				t.Fatalf("again: %+v %v, want the cached denial naming %q", r, err, keys[tc.binding].Key)
			}
			if cnt.scriptCalls() != before {
				t.Fatal("the cached denial went to Redis")
			}
			// Other keys, limits or cost: to Redis.
			for _, other := range [][]KeyLimit{
				{keys[1], keys[0]}, userOrg(tc.deniedU, user, PerHour(2)), userOrg("d", user, org),
			} {
				if r, _ := l.Decide(ctx, Request{Keys: other}); r.Source != SourceRedis {
					t.Errorf("%v: %+v, want Redis's answer", other, r)
				}
			}
			if r, _ := l.Decide(ctx, Request{Keys: keys, N: 2}); r.Source != SourceRedis {
				t.Errorf("cost 2: %+v, want Redis's answer", r)
			}
			tc.then(l)
			before = cnt.scriptCalls()
			r, err = l.Decide(ctx, Request{Keys: keys})
			if fromCache := r.Source == SourceDenyCache; err != nil || fromCache != tc.cached || fromCache != (cnt.scriptCalls() == before) {
				t.Fatalf("after %s: %+v %v, want from the cache %v", tc.name, r, err, tc.cached)
			}
			_ = f
		})
	}
}

// keysObserver records the Decisions of calls of several keys.
type keysObserver struct {
	mu  sync.Mutex
	got []string
}

func (o *keysObserver) Start(ctx context.Context, _ Decision) context.Context { return ctx }
func (o *keysObserver) End(_ context.Context, d Decision, res Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	name := ""
	if !d.WholeBatch && err == nil {
		name = d.Limits[res.Binding].Name
	}
	keys := fmt.Sprintf("%q", d.Keys)
	if d.Keys == nil {
		keys = "nil"
	}
	o.got = append(o.got, fmt.Sprintf("%s key=%s keys=%s limits=%d binding=%s res.key=%s", asked(d), d.Key, keys, len(d.Limits), name, res.Key))
}

// TestObserverSeesKeys: the observer is told the keys of a call of several
// keys (nil for one key), and Limits[Result.Binding] names the binding
// limit, in a batch too.
func TestObserverSeesKeys(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	obs := &keysObserver{}
	l := testLimiter(f.rdb, WithObserver(obs), WithKeyPrefix("p:"))
	user, org := PerHour(1).WithName("user"), PerHour(10).WithName("org")
	_, _ = l.Decide(ctx, Request{Keys: userOrg("a", user, org)})
	_, _ = l.Decide(ctx, Request{Kind: KindCheck, Keys: userOrg("b", user, org)})
	_, _ = l.Decide(ctx, Request{Kind: KindPeek, Keys: userOrg("b", user, org)})
	_, _ = l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{"{org:7}", org}}})
	_, _ = l.DecideBatch(ctx, []Request{{Keys: userOrg("a", user, org)}, {Key: "{org:7}", Limits: []Limit{org}, N: 7}})
	want := []string{
		`allow key={org:7}:user:a keys=["{org:7}:user:a" "{org:7}"] limits=2 binding=user res.key={org:7}:user:a`,
		`check key={org:7}:user:b keys=["{org:7}:user:b" "{org:7}"] limits=2 binding=user res.key={org:7}:user:b`,
		`peek key={org:7}:user:b keys=["{org:7}:user:b" "{org:7}"] limits=2 binding=user res.key={org:7}:user:b`,
		`allow key={org:7} keys=nil limits=1 binding=org res.key={org:7}`,
		`allow key={org:7}:user:a keys=["{org:7}:user:a" "{org:7}"] limits=2 binding=user res.key={org:7}:user:a`,
		`allow key={org:7} keys=nil limits=1 binding=org res.key={org:7}`,
		`batch key= keys=nil limits=0 binding= res.key=`,
	}
	if strings.Join(obs.got, "\n") != strings.Join(want, "\n") {
		t.Errorf("observed:\n%s\nwant:\n%s", strings.Join(obs.got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFallbackSeveralKeys: a call of several keys that Redis cannot decide
// goes to the fallback as a call of the same several keys, all or nothing
// there too.
func TestFallbackSeveralKeys(t *testing.T) {
	ctx := context.Background()
	fbr := newFakeRedis(t)
	l := testLimiter(downRedis(t), WithKeyPrefix("rate:"), WithFallback(testLimiter(fbr.rdb)))
	user, org := PerMinute(2), PerMinute(3)
	for i, u := range []string{"a", "a", "a", "b", "b"} {
		r, err := l.Decide(ctx, Request{Keys: userOrg(u, user, org)})
		wantAllowed, wantKey := i != 2 && i != 4, "{org:7}"
		if i < 3 {
			wantKey = "{org:7}:user:a"
		}
		if err != nil || r.Source != SourceFallback || r.Allowed != wantAllowed || r.Key != wantKey {
			t.Fatalf("call %d (%s): %+v %v, want allowed %v by the fallback, binding %s", i, u, r, err, wantAllowed, wantKey)
		}
	}
	if r, err := testLimiter(fbr.rdb).Decide(ctx, Request{Kind: KindPeek, Key: "{org:7}:user:b", Limits: []Limit{user}}); err != nil || r.Remaining != 1 {
		t.Errorf("the fallback's state of b: %v %v, want 1 of 2 left", r, err)
	}
}

// TestCrossSlotIsInvalid: Redis Cluster's CROSSSLOT refusal is the
// caller's to fix (ErrInvalid, never answered by a failure policy), and
// says to use a hash tag.
func TestCrossSlotIsInvalid(t *testing.T) {
	o := op{s: &algoScripts[GCRA], key: "rate:user:1", keys: []string{"rate:user:1", "rate:org:7"}}
	err := errors.New("CROSSSLOT Keys in request don't hash to the same slot") // as go-redis reads the reply
	kind := classify(err)
	e := o.failed(err, kind)
	if kind != ErrInvalid || !errors.Is(e, ErrInvalid) || errors.Is(e, ErrUnavailable) || e.unavailable() ||
		!strings.Contains(e.Error(), "hash tag") || !strings.Contains(e.Error(), "{org:7}:user:42 and {org:7}") || !strings.Contains(e.Error(), "CROSSSLOT") {
		t.Errorf("CROSSSLOT: %v, want ErrInvalid with the hash-tag advice", e)
	}
}
