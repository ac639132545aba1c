package ratecore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
)

// req is a request as a test transport sees it: its key and its scopes'.
type req struct{ key, scope string }

func own(r req) (string, error)     { return r.key, nil }
func account(r req) (string, error) { return r.scope, nil }

// rules are Rules of a Limiter that no call reaches.
func rules(t *testing.T, c Config[req]) (*Rules[req], error) {
	t.Helper()
	if c.Limiter == nil {
		c.Limiter = redisrate.NewLimiter(nil)
	}
	if c.Name == "" {
		c.Name = "api"
	}
	if c.Key == nil {
		c.Key = own
	}
	return New(c)
}

// TestScopedKeys: whatever clients send, the keys of a request all start
// with the account's hash tag, and a key names one thing only: the own key
// one (account, key), the API key's one (account, API key), the account's
// one account.
func TestScopedKeys(t *testing.T) {
	hostile := []string{"", "x", "x}", "x}:a:k", "%", "%7D", "}", "{", "{}", "a:b", "x}{y", "plan", "key"}
	scopes := []Scope[func(req) (string, error)]{{Name: "key"}, {Name: "account"}}
	seen := map[string]string{}
	for _, apiKey := range hostile {
		for _, acct := range hostile {
			for _, key := range hostile {
				keys := scopedKeys("api", "plan", key, scopes, []string{apiKey, acct})
				tag := keys[2]
				for i, names := range []string{"own " + key + " of " + acct, "api key " + apiKey + " of " + acct, "account " + acct} {
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
		if got := callerGaveUp(tc.err); got != tc.want {
			t.Errorf("callerGaveUp(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// New checks the scopes once, keeps what it was given, and names the
// fields of the transports' Config in its errors.
func TestScopes(t *testing.T) {
	limit := redisrate.PerMinute(3)
	scopes := []Scope[func(req) (string, error)]{{Name: "account", Key: account, Limit: limit}}
	r, err := rules(t, Config[req]{Scopes: scopes, Unit: "call"})
	if err != nil {
		t.Fatal(err)
	}
	scopes[0].Name, scopes[0].Limit = "changed", redisrate.PerHour(1)
	rule, err := r.Rule("", "", []redisrate.Limit{redisrate.PerSecond(2)})
	if err != nil || rule.fields.policy != `"api";q=2;w=1, "account";q=3;w=60` {
		t.Errorf("the rule with a scope: %v, %v; want the own limit, then the account's as given", rule, err)
	}

	seven := make([]Scope[func(req) (string, error)], 8)
	for i := range seven {
		seven[i] = Scope[func(req) (string, error)]{Name: fmt.Sprint("s", i), Key: account, Limit: limit}
	}
	for _, tc := range []struct {
		scopes []Scope[func(req) (string, error)]
		want   string
	}{
		{seven, "Config.Scopes has 8 scopes: at most 7, for 8 keys in one call with the call's own"},
		{[]Scope[func(req) (string, error)]{{Name: "a", Key: account, Limit: limit}, {Name: "a", Key: account, Limit: limit}}, `Config.Scopes[1] has the Name "a" of Config.Scopes[0]`},
		{[]Scope[func(req) (string, error)]{{Name: "api", Key: account, Limit: limit}}, `Config.Scopes[0] has the Name "api" of Config.Name`},
		{[]Scope[func(req) (string, error)]{{Name: "a}", Key: account, Limit: limit}}, `invalid Config.Scopes[0].Name "a}": '{' and '}'`},
		{[]Scope[func(req) (string, error)]{{Name: "é", Key: account, Limit: limit}}, `invalid Config.Scopes[0].Name "é": policy name`},
		{[]Scope[func(req) (string, error)]{{Name: "a", Key: account, Limit: redisrate.Limit{Period: time.Second}}}, `Config.Scopes[0] ("a"): invalid Limit`},
		{[]Scope[func(req) (string, error)]{{Name: "a", Limit: limit}}, `Config.Scopes[0] ("a") has no Key`},
	} {
		if _, err := rules(t, Config[req]{Scopes: tc.scopes, Unit: "call"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d scopes: %v; want an error with %q", len(tc.scopes), err, tc.want)
		}
	}
	if _, err := rules(t, Config[req]{Scopes: seven[:7]}); err != nil {
		t.Errorf("7 scopes: %v; want them taken", err)
	}
	two := []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(9)}
	for _, tc := range []struct {
		name   string
		limits []redisrate.Limit
		want   string
	}{
		{"", two, "2 limits with Config.Scopes"},
		{"", []redisrate.Limit{redisrate.PerSecond(1).WithName("account")}, `a limit's Name: policy name "account" twice`},
		{"", []redisrate.Limit{redisrate.PerSecond(1).WithAlgorithm(redisrate.SlidingLog)}, `Config.Scopes[0] ("account") has a gcra limit, and the call's own is sliding_log`},
		{"account", two[:1], `the name "account" is that of Config.Scopes[0]`},
		{"a:b", two[:1], "':' separates the names"},
	} {
		if _, err := r.Rule(tc.name, "", tc.limits); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Rule(%q, %v): %v; want an error with %q", tc.name, tc.limits, err, tc.want)
		}
	}
	own, err := r.Rule("named", "", []redisrate.Limit{redisrate.PerSecond(2).WithName("own")})
	if err != nil || own.fields.policy != `"own";q=2;w=1, "account";q=3;w=60` {
		t.Errorf("a named own limit with a scope: %v, %v; want the own limit named by its Name", own, err)
	}
}

// A limit's policy name is its Name wherever it stands: a scope's limit
// with a Name is named by it, not by the scope (whose Name still lays out
// its keys); and no limit may take the quota's name, which a response
// naming both policies could not tell apart.
func TestPolicyNamesOfScopesAndQuota(t *testing.T) {
	scopes := []Scope[func(req) (string, error)]{{Name: "account", Key: account, Limit: redisrate.PerMinute(3).WithName("acct-minute")}}
	r, err := rules(t, Config[req]{Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := r.Rule("", "", []redisrate.Limit{redisrate.PerSecond(2)})
	if err != nil || rule.fields.policy != `"api";q=2;w=1, "acct-minute";q=3;w=60` {
		t.Errorf("a scope whose limit has a Name: %v, %v; want the limit's Name as its policy name", rule, err)
	}
	if _, err := r.Rule("", "", []redisrate.Limit{redisrate.PerSecond(2).WithName("acct-minute")}); err == nil || !strings.Contains(err.Error(), `policy name "acct-minute" twice`) {
		t.Errorf("a rule's limit named as a scope's limit: %v; want the name refused", err)
	}
	q, err := rules(t, Config[req]{Quota: &Quota{Key: "upstream", Limit: redisrate.PerMinute(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Rule("", "", []redisrate.Limit{redisrate.PerMinute(5).WithName("upstream")}); err == nil || !strings.Contains(err.Error(), `policy name "upstream" is Config.Quota.Key's too`) {
		t.Errorf("a limit named as the quota: %v; want the name refused", err)
	}
	if _, err := q.Rule("", "", []redisrate.Limit{redisrate.PerMinute(5)}); err != nil {
		t.Errorf("a limit of another name beside the quota: %v", err)
	}
}

// A rule names its limits as both middleware do, for the fields and for
// metrics, and refuses what could never serve.
func TestRule(t *testing.T) {
	r, err := rules(t, Config[req]{})
	if err != nil {
		t.Fatal(err)
	}
	two := []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(9)}
	named := []redisrate.Limit{two[0].WithName("burst"), two[1].WithName("hourly")}
	for _, tc := range []struct {
		lims []redisrate.Limit
		want string // the policy names, as the limits' Names too
	}{
		{two[:1], "api"},
		{two, "api-1,api-2"},
		{named, "burst,hourly"},
		{[]redisrate.Limit{two[0], named[1]}, "api-1,hourly"},
	} {
		rule, err := r.Rule("", "", tc.lims)
		if err != nil {
			t.Fatalf("%v: %v", tc.lims, err)
		}
		var got []string
		for i, l := range rule.fields.limits {
			if l.Name != rule.fields.name(i) {
				t.Errorf("%v: limit %d named %q in metrics, %q in the fields", tc.lims, i, l.Name, rule.fields.name(i))
			}
			got = append(got, l.Name)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%v: names %q; want %s", tc.lims, got, tc.want)
		}
	}
	if two[0].Name != "" {
		t.Errorf("Rule named the caller's limit: %q", two[0].Name)
	}
	for _, tc := range []struct {
		lims []redisrate.Limit
		want string
	}{
		{nil, "no limits: give at least one"},
		{[]redisrate.Limit{named[0], named[0]}, `a limit's Name: policy name "burst" twice`},
		{[]redisrate.Limit{two[0].WithName("x-2"), two[1]}, `a limit's Name: policy name "x-2" twice`},
		{[]redisrate.Limit{two[0].WithName("é")}, `a limit's Name: policy name "é": must be printable ASCII`},
		{[]redisrate.Limit{redisrate.PerSecond(1), redisrate.PerSecond(1).WithAlgorithm(redisrate.FixedWindow)}, "algorithm"},
		{[]redisrate.Limit{redisrate.PerSecond(1).WithBurst(-1)}, "invalid burst '-1'"},
	} {
		if _, err := r.Rule("x", "", tc.lims); err == nil || !strings.Contains(err.Error(), tc.want) { // refused: "x" stays free
			t.Errorf("Rule(%v): %v; want an error with %q", tc.lims, err, tc.want)
		}
	}
	if _, err := r.Rule("y", "", []redisrate.Limit{redisrate.PerSecond(0)}); !errors.Is(err, redisrate.ErrInvalid) {
		t.Errorf("an invalid limit: %v; want an error matching ErrInvalid", err)
	}
	if _, err := r.Rule("free", `the plan "free"`, two[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Rule("free", `the plan "free"`, two[:1]); err == nil || !strings.Contains(err.Error(), `that of the plan "free"`) {
		t.Errorf("a rule's name twice: %v; want an error naming the first", err)
	}
	if !slices.Equal([]string{escape("/a.S/M"), escape("%x"), escape("ip:1")}, []string{"%/a.S/M", "%%x", "ip:1"}) {
		t.Error("escape: a key that could read as a method's is not escaped")
	}
}
