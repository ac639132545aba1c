package httplimit_test

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/readmetest"
)

// passwords stands for an account store: a password check that costs a
// hash in real life.
type passwords map[string]string

func (p passwords) Verify(user, password string) bool { return p[user] != "" && p[user] == password }

// The login recipe of docs/http.md, the "penalty box": 5 failed logins per
// account and address in any 15 minutes, then a wait; a success clears the
// slate.
func Example_login() {
	rdb, done := exampleRedis()
	defer done()
	accounts := passwords{"ada": "correct horse"}
	// An outage of Redis must not lift a lockout: this Limiter refuses
	// while Redis cannot decide.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed))

	// login:start
	// 5 failures in any 15 minutes: sliding_log counts them exactly.
	failures := redisrate.Per(5, 15*time.Minute).WithAlgorithm(redisrate.SlidingLog).WithName("login")
	const penalty = 1 // the units a failed login costs; more for failures that look like guessing
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.PostFormValue("user")
		ip, _, _ := net.SplitHostPort(r.RemoteAddr) // behind proxies: httplimit.ClientIP
		key := "login:" + user + ":" + ip
		// Decided before the password is verified: a locked-out client
		// costs no password hash. The penalty is taken now, not after a
		// failure, so that parallel attempts cannot all pass a check
		// before any of their failures is counted.
		res, err := limiter.AllowN(r.Context(), key, failures, penalty)
		switch {
		case err != nil || res.Degraded() && !res.Allowed:
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		case !res.Allowed:
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(res.RetryAfter.Seconds())), 10))
			http.Error(w, "too many failed logins", http.StatusTooManyRequests)
			return
		}
		if !accounts.Verify(user, r.PostFormValue("password")) {
			http.Error(w, "wrong user or password", http.StatusUnauthorized) // the penalty stays
			return
		}
		_ = limiter.Reset(r.Context(), key) // a success clears the slate
		fmt.Fprintln(w, "welcome,", user)
	})
	// login:end

	try := func(user, password string) {
		form := url.Values{"user": {user}, "password": {password}}
		r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		login.ServeHTTP(w, r)
		fmt.Println(user, password, w.Code, w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String()))
	}
	try("ada", "guess 1")
	try("ada", "guess 2")
	try("ada", "correct horse") // clears the two failures
	for i := range 6 {
		try("ada", "guess "+strconv.Itoa(i+3))
	}
	try("ada", "correct horse") // locked out: the password is not even checked
	// Output:
	// ada guess 1 401  wrong user or password
	// ada guess 2 401  wrong user or password
	// ada correct horse 200  welcome, ada
	// ada guess 3 401  wrong user or password
	// ada guess 4 401  wrong user or password
	// ada guess 5 401  wrong user or password
	// ada guess 6 401  wrong user or password
	// ada guess 7 401  wrong user or password
	// ada guess 8 429 900 too many failed logins
	// ada correct horse 429 900 too many failed logins
}

// TestDocsLoginIsExample keeps docs/http.md's login recipe the same code as
// Example_login.
func TestDocsLoginIsExample(t *testing.T) {
	readmetest.Check(t, "login_example_test.go", "../docs/http.md", "login")
}
