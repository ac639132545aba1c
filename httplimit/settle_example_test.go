package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
)

// A cost known only after the handler has run: a model's tokens. Each
// request reserves its max_tokens (Config.Cost, with Config.Settle), and
// the handler reports the tokens the model used (httplimit.Used); the
// middleware then gives the difference back, or records it as a debt.
func ExampleUsed() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	user := httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }) // after authentication

	tokens, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "tokens",
		Limits:  []redisrate.Limit{redisrate.PerMinute(10_000)},
		Key:     user, // the authenticated user's id
		Cost: func(r *http.Request) (int64, error) {
			return strconv.ParseInt(r.URL.Query().Get("max_tokens"), 10, 64) // the estimate
		},
		Settle: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	complete := tokens.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := int64(700) // the model's reply: its usage
		httplimit.Used(r, used)
		fmt.Fprintln(w, "completion")
	}))

	for range 3 {
		r := httptest.NewRequest("POST", "/v1/complete?max_tokens=4000", nil)
		r.Header.Set("X-User", "ada")
		w := httptest.NewRecorder()
		complete.ServeHTTP(w, r)
		left, _ := limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: "tokens:ada", Limits: []redisrate.Limit{redisrate.PerMinute(10_000)}})
		fmt.Println(w.Code, w.Header().Get("RateLimit"), "then", left.Remaining, "left")
	}
	// Output:
	// 200 "tokens";r=6000;t=1 then 9300 left
	// 200 "tokens";r=5300;t=1 then 8600 left
	// 200 "tokens";r=4600;t=1 then 7900 left
}

// TestSettleAfterHandler: a handler's report is settled once it returns,
// down (a refund) and up (a debt), under a context the client's leaving
// does not cancel; a handler that reports nothing keeps the estimate; a
// settlement that fails is told to OnError; without Config.Settle, Used is
// ignored.
func TestSettleAfterHandler(t *testing.T) {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	limit := redisrate.PerHour(100)
	var mu sync.Mutex
	var errs []error
	switchable := &switchable{Scripter: rdb}
	byUser := httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil })
	newMW := func(l *redisrate.Limiter, settle bool, policy redisrate.FailurePolicy) http.Handler {
		mw, err := httplimit.New(httplimit.Config{
			Limiter: l, Name: "t", Limits: []redisrate.Limit{limit}, Key: byUser, Settle: settle, FailurePolicy: policy,
			Cost: func(r *http.Request) (int64, error) { return 10, nil },
			OnError: func(r *http.Request, err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if u := q.Get("used"); u != "" {
				n, _ := strconv.ParseInt(u, 10, 64)
				httplimit.Used(r, n)
			}
			if cancel, ok := r.Context().Value(cancelKey{}).(context.CancelFunc); ok {
				cancel() // the client is gone by the time the handler returns
			}
			switchable.down.Store(q.Get("down") != "")
		}))
	}
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	left := func(user string) int64 {
		res, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "t:" + user, Limits: []redisrate.Limit{limit}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Remaining
	}
	call := func(h http.Handler, user, query string) int {
		r := httptest.NewRequest("GET", "/?"+query, nil)
		r.Header.Set("X-User", user)
		c, cancel := context.WithCancel(r.Context())
		defer cancel()
		if strings.Contains(query, "gone") {
			r = r.WithContext(context.WithValue(c, cancelKey{}, cancel))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	settling := newMW(limiter, true, 0)
	for _, c := range []struct {
		user, query string
		want        int64
	}{
		{"down", "used=3", 97},
		{"up", "used=150", 0}, // 10 reserved, 150 used: forced as far as a debt of one capacity
		{"gone", "used=150&gone=1", 0},
		{"silent", "", 90},
		{"negative", "used=-1", 90},
	} {
		if code := call(settling, c.user, c.query); code != 200 || left(c.user) != c.want {
			t.Errorf("%s: %d, %d left; want 200, %d left", c.user, code, left(c.user), c.want)
		}
	}
	if code := call(settling, "up", ""); code != 429 {
		t.Errorf("a client in debt: %d, want 429", code)
	}
	if call(newMW(limiter, false, 0), "plain", "used=3"); left("plain") != 90 {
		t.Errorf("Used without Config.Settle: %d left, want 90", left("plain"))
	}
	mu.Lock()
	if len(errs) != 0 {
		t.Errorf("OnError was told %v", errs)
	}
	mu.Unlock()
	// Redis goes away between the reservation and the settlement: the
	// estimate stands, and OnError is told under every failure policy: a
	// settlement that Redis did not decide recorded nothing, whatever the
	// policy answered.
	for _, policy := range []redisrate.FailurePolicy{redisrate.FailOpen, redisrate.FailError} {
		outage := newMW(redisrate.NewLimiter(switchable), true, policy)
		switchable.down.Store(false)
		if code := call(outage, "outage-"+policy.String(), "used=3&down=1"); code != 200 || left("outage-"+policy.String()) != 90 {
			t.Errorf("%v: a settlement that fails: %d, %d left; want the handler's 200, the estimate kept", policy, code, left("outage-"+policy.String()))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 || !errors.Is(errs[0], redisrate.ErrUnavailable) || !errors.Is(errs[1], redisrate.ErrUnavailable) {
		t.Errorf("OnError was told %v, want the two failed settlements", errs)
	}
}

type cancelKey struct{}

// switchable is a Redis client whose scripts fail while down is set.
type switchable struct {
	redis.Scripter
	down atomic.Bool
}

var errDown = errors.New("dial tcp: connection refused")

func (s *switchable) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	if s.down.Load() {
		return redis.NewCmdResult(nil, errDown)
	}
	return s.Scripter.EvalSha(ctx, sha1, keys, args...)
}

func (s *switchable) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if s.down.Load() {
		return redis.NewCmdResult(nil, errDown)
	}
	return s.Scripter.Eval(ctx, script, keys, args...)
}
