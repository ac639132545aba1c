package redisrate

import (
	"context"
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
