package httplimit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/readmetest"
)

// passwords stands for an account store: a password check that costs a
// hash in real life.
type passwords map[string]string

func (p passwords) Verify(user, password string) bool { return p[user] != "" && p[user] == password }

// The login recipe of docs/http.md, the "penalty box": 5 failed logins per
// account and address, and 20 per account, in any 15 minutes, then a wait;
// a success clears the slate.
func Example_login() {
	rdb, done := exampleRedis()
	defer done()
	accounts := passwords{"ada": "correct horse"}
	// An outage of Redis must not lift a lockout: this Limiter refuses
	// while Redis cannot decide.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed))

	// login:start
	// 5 failures in any 15 minutes from one address (an IPv6 client's /64,
	// which one client holds whole), 20 from every address together, so
	// that many addresses cannot guess on without end: sliding_log counts
	// them exactly, and one call decides both, all or nothing.
	perAddress := redisrate.Per(5, 15*time.Minute).WithAlgorithm(redisrate.SlidingLog).WithName("login")
	perAccount := redisrate.Per(20, 15*time.Minute).WithAlgorithm(redisrate.SlidingLog).WithName("login-account")
	const penalty = 1                              // the units a failed login costs; more for failures that look like guessing
	address, err := httplimit.ClientIP{}.KeyFunc() // behind proxies: set its TrustedProxies
	if err != nil {
		log.Fatal(err)
	}
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.PostFormValue("user")
		ip, err := address(r)
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		// The account's key is a hash of the name: whatever a client types
		// there, it neither grows the key nor leaves its hash tag, which
		// keeps both keys in one Redis Cluster slot.
		sum := sha256.Sum256([]byte(user))
		account := "{login:" + hex.EncodeToString(sum[:12]) + "}"
		keys := []redisrate.KeyLimit{{Key: account + ":" + ip, Limit: perAddress}, {Key: account, Limit: perAccount}}
		// Decided before the password is verified: a locked-out client
		// costs no password hash. The penalty is taken now, not after a
		// failure, so that parallel attempts cannot all pass a check
		// before any of their failures is counted.
		res, err := limiter.Decide(r.Context(), redisrate.Request{Keys: keys, N: penalty})
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
		for _, k := range keys { // a success clears the slate
			_ = limiter.Reset(r.Context(), k.Key)
		}
		fmt.Fprintln(w, "welcome,", user)
	})
	// login:end

	from := "192.0.2.1:1234"
	try := func(user, password string) {
		form := url.Values{"user": {user}, "password": {password}}
		r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
		r.RemoteAddr = from
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
	from = "198.51.100.7:1234"
	try("ada", "correct horse") // another address: its own 5, and the account's 20 not spent
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
	// ada correct horse 200  welcome, ada
}

// TestDocsLoginIsExample keeps docs/http.md's login recipe the same code as
// Example_login.
func TestDocsLoginIsExample(t *testing.T) {
	readmetest.Check(t, "login_example_test.go", "../docs/http.md", "login")
}
