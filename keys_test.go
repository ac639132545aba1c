package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Several keys in one call (issue 21, contract v2.1 "Several keys").

// userOrg is the KeyLimits of user u of organisation 7: the user's limit,
// then the organisation's.
func userOrg(u string, user, org Limit) []KeyLimit {
	return []KeyLimit{{Key: "{org:7}:user:" + u, Limit: user}, {Key: "{org:7}", Limit: org}}
}

// TestAllowKeysBinding: the Result names the binding key and limit, by the
// user when the user's limit binds and by the organisation when its does,
// on admissions and denials.
func TestAllowKeysBinding(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := NewLimiter(f.rdb, WithKeyPrefix("rate:"))
	user, org := PerMinute(3).WithName("user"), PerMinute(5).WithName("org")
	want := func(what string, r Result, err error, allowed bool, binding int, key string) {
		t.Helper()
		if err != nil || r.Allowed != allowed || r.Binding != binding || r.Key != key || r.Limit != []Limit{user, org}[binding] {
			t.Fatalf("%s: %+v %v, want allowed %v, binding %d on %q", what, r, err, allowed, binding, key)
		}
	}
	r, err := l.AllowKeys(ctx, 1, userOrg("a", user, org)...)
	want("a's first", r, err, true, 0, "{org:7}:user:a") // 2 of 3 left for a, 4 of 5 for the org
	r, err = l.AllowKeys(ctx, 2, userOrg("a", user, org)...)
	want("a's two more", r, err, true, 0, "{org:7}:user:a")
	r, err = l.AllowKeys(ctx, 1, userOrg("a", user, org)...)
	want("a's fourth", r, err, false, 0, "{org:7}:user:a")
	r, err = l.AllowKeys(ctx, 1, userOrg("b", user, org)...)
	want("b's first", r, err, true, 1, "{org:7}") // 2 left for b, 1 for the org
	if r.Remaining != 1 {
		t.Errorf("b's first: %d left, want the organisation's 1", r.Remaining)
	}
	r, err = l.AllowKeys(ctx, 2, userOrg("c", user, org)...)
	want("c's two", r, err, false, 1, "{org:7}")
	r, err = l.CheckKeys(ctx, 1, userOrg("c", user, org)...)
	want("c's check", r, err, true, 1, "{org:7}")
	r, err = l.PeekKeys(ctx, userOrg("c", user, org)...)
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
	r, err = l.AllowKeys(ctx, 1, userOrg("c", user, org)...)
	want("c, a unit later", r, err, true, 1, "{org:7}")
}

// TestAllowKeysDenialWritesNothing: a call denied by either key's limit,
// whichever is first, writes nothing on either key: value and TTL alike;
// nor does a check or a peek.
func TestAllowKeysDenialWritesNothing(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := NewLimiter(f.rdb)
			user, org := PerMinute(2).WithAlgorithm(a), PerMinute(3).WithAlgorithm(a)
			u1, u2, o := "{org:7}:user:1", "{org:7}:user:2", "{org:7}"
			for range 2 {
				if r, err := l.AllowKeys(ctx, 1, userOrg("1", user, org)...); err != nil || !r.Allowed {
					t.Fatalf("u1: %+v %v, want admitted", r, err)
				}
			}
			f.advance(time.Second) // so that a write would change a TTL
			denied := func(what string, keys []KeyLimit, binding int) {
				t.Helper()
				before := []string{f.dump(u1), f.dump(u2), f.dump(o)}
				r, err := l.AllowKeys(ctx, 1, keys...)
				if err != nil || r.Allowed || r.Binding != binding || r.Key != keys[binding].Key {
					t.Fatalf("%s: %+v %v, want denied by key #%d", what, r, err, binding+1)
				}
				if _, err := l.CheckKeys(ctx, 1, keys...); err != nil {
					t.Fatal(err)
				}
				if _, err := l.PeekKeys(ctx, keys...); err != nil {
					t.Fatal(err)
				}
				if after := []string{f.dump(u1), f.dump(u2), f.dump(o)}; fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s wrote:\n  before %q\n  after  %q", what, before, after)
				}
			}
			uo := userOrg("1", user, org)
			denied("denied by the user's limit", uo, 0)
			denied("denied by the user's limit, the organisation first", []KeyLimit{uo[1], uo[0]}, 1)
			if r, err := l.AllowKeys(ctx, 1, userOrg("2", user, org)...); err != nil || !r.Allowed {
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

// TestAllowKeysSharedOrganisation: many users' calls share the
// organisation's key, which is also called alone with its limit: its state
// is one, and the users' are each their own.
func TestAllowKeysSharedOrganisation(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := NewLimiter(f.rdb, WithKeyPrefix("rate:"))
			user, org := PerHour(3).WithAlgorithm(a), PerHour(20).WithAlgorithm(a)
			admitted := map[string]int{}
			total := 0
			for round := range 5 {
				for u := range 10 {
					name := fmt.Sprint(u)
					r, err := l.AllowKeys(ctx, 1, userOrg(name, user, org)...)
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
				r, err := l.Peek(ctx, "{org:7}:user:"+name, user)
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

// TestAllowKeysForeignKey: a foreign value on key 2 gets an error naming key
// #2, and nothing is written on key 1, new or holding state; on key 1, key 1.
func TestAllowKeysForeignKey(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			l := NewLimiter(f.rdb, WithKeyPrefix("rate:"))
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
				_, err := l.AllowKeys(ctx, 1, userOrg(u, user, org)...)
				var e *Error
				if !errors.Is(err, ErrForeignKey) || errors.Is(err, ErrUnavailable) || !errors.As(err, &e) || e.Key != "rate:{org:7}" ||
					!strings.Contains(err.Error(), "key #2") {
					t.Fatalf("user %s: %v (%#v), want ErrForeignKey naming key #2, rate:{org:7}", u, err, e)
				}
				if after := f.dump("rate:{org:7}:user:" + u); after != before {
					t.Errorf("user %s: key 1 written: %s, then %s", u, before, after)
				}
			}
			_, err := l.AllowKeys(ctx, 1, KeyLimit{"{org:7}", org}, KeyLimit{"{org:7}:user:old", user})
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

// TestAllowKeysInvalid: a call of several keys is refused before any round
// trip, with words naming what is wrong and where, as the scripts word it.
func TestAllowKeysInvalid(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := NewLimiter(f.rdb, WithKeyPrefix("rate:"))
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
		{"no key", func() (Result, error) { return l.AllowKeys(ctx, 1) }, "no key given"},
		{"no key, peek", func() (Result, error) { return l.PeekKeys(ctx) }, "no key given"},
		{"nine keys", func() (Result, error) { return l.AllowKeys(ctx, 1, nine...) }, "invalid numkeys '9': must be at most 8"},
		{"empty key", func() (Result, error) { return l.AllowKeys(ctx, 1, kl("a", "b", "")...) }, "invalid key #3 '': must not be empty"},
		{"same key", func() (Result, error) { return l.AllowKeys(ctx, 1, kl("a", "b", "a")...) }, "invalid key #3 'a': must differ from key #1"},
		{"same key, check", func() (Result, error) { return l.CheckKeys(ctx, 1, kl("a", "b", "b")...) }, "invalid key #3 'b': must differ from key #2"},
		{"two algorithms", func() (Result, error) {
			return l.AllowKeys(ctx, 1, KeyLimit{"a", lim}, KeyLimit{"b", lim.WithAlgorithm(TokenBucket)})
		}, "invalid algorithm #2 'token_bucket' (key #2 'b'): must be key #1's, gcra"},
		{"bad limit", func() (Result, error) {
			return l.AllowKeys(ctx, 1, KeyLimit{"a", lim}, KeyLimit{"b", Per(0, time.Second)})
		}, "invalid limit #2 '0'"},
		{"cost 0", func() (Result, error) { return l.AllowKeys(ctx, 0, kl("a", "b")...) }, "invalid cost '0'"},
		{"negative cost", func() (Result, error) { return l.CheckKeys(ctx, -1, kl("a", "b")...) }, "invalid cost '-1'"},
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
	if r, err := l.AllowKeys(ctx, 2, KeyLimit{"solo", lim}); err != nil || !r.Allowed || r.Key != "solo" || r.Remaining != 8 {
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
