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
// hash in real life. checks counts the checks made.
type passwords struct {
	users  map[string]string
	checks int
}

func (p *passwords) Verify(user, password string) bool {
	p.checks++
	return p.users[user] != "" && p.users[user] == password
}

// loginHandler is the login recipe of docs/http.md.
func loginHandler(limiter *redisrate.Limiter, accounts *passwords) http.Handler {
	// login:start
	// Every attempt is counted before the password is checked, under three
	// limits (OWASP's authentication guidance):
	//   - perNetwork: 100 units an hour from one address (an IPv6
	//     client's /48) across all accounts. An attempt takes 5, and a
	//     success gives 4 back: a failure's penalty. A password spray gets
	//     20 guesses, however many accounts it tries, while the users
	//     behind one address (an office's NAT) log in 96 times an hour;
	//   - failures: 5 failures in a row on one account from one address
	//     (an IPv6 client's /64); a success there ends the run;
	//   - perAccount: 100 attempts an hour on one account from every
	//     address together, never cleared by a success. It caps the
	//     guesses of a botnet, and is a lockout that anyone with 20
	//     addresses can trigger: keep it high, and let the owner in by a
	//     second way (a link by email, a known device).
	perNetwork := redisrate.Per(100, time.Hour).WithAlgorithm(redisrate.SlidingLog).WithName("login-network")
	failures := redisrate.Per(5, 15*time.Minute).WithAlgorithm(redisrate.SlidingLog).WithName("login")
	perAccount := redisrate.Per(100, time.Hour).WithAlgorithm(redisrate.SlidingLog).WithName("login-account")
	address, err := httplimit.ClientIP{}.KeyFunc() // behind proxies: set Header and TrustedProxies
	if err != nil {
		log.Fatal(err)
	}
	network, err := httplimit.ClientIP{IPv6Prefix: 48}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.PostFormValue("user")
		ip, err := address(r)
		nw, err2 := network(r)
		if err != nil || err2 != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		// The account's key is a hash of the name: whatever a client types
		// there, it neither grows the key nor leaves its hash tag, which
		// keeps both of the account's keys in one Redis Cluster slot.
		sum := sha256.Sum256([]byte(user))
		account := "{login:" + hex.EncodeToString(sum[:12]) + "}"
		keys := []redisrate.KeyLimit{{Key: account + ":" + ip, Limit: failures}, {Key: account, Limit: perAccount}}
		// Taken before the password is checked, not after a failure: a
		// locked-out client costs no password hash, and parallel attempts
		// cannot all pass a check before any of them is counted. So the
		// address's penalty is reserved with the attempt, and a success
		// settles it down to 1.
		attempt, err := limiter.Reserve(r.Context(), redisrate.Request{Key: "login-network:" + nw, Limits: []redisrate.Limit{perNetwork}, N: 5})
		var res redisrate.Result
		if err == nil {
			res = attempt.Result
		}
		if err == nil && res.Allowed {
			res, err = limiter.Decide(r.Context(), redisrate.Request{Keys: keys})
		}
		switch {
		case err != nil || res.Degraded() && !res.Allowed:
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		case !res.Allowed:
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(res.RetryAfter.Seconds())), 10))
			http.Error(w, "too many login attempts", http.StatusTooManyRequests)
			return
		}
		if !accounts.Verify(user, r.PostFormValue("password")) {
			http.Error(w, "wrong user or password", http.StatusUnauthorized)
			return
		}
		_, _ = attempt.Settle(r.Context(), 1)       // a success costs the address 1
		_ = limiter.Reset(r.Context(), keys[0].Key) // ends the run of failures from here; the other counts stay
		fmt.Fprintln(w, "welcome,", user)
	})
	// login:end
	return login
}

// loginLimiter is the recipe's Limiter: it fails closed, said explicitly,
// as an outage of Redis must not lift a lockout. Its decision timeout is
// long for the tests' sake: a call that a loaded machine holds past the
// default 200 ms would be a 503, not the answer the tests count.
func loginLimiter() (*redisrate.Limiter, func()) {
	rdb, done := exampleRedis()
	return redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed), redisrate.WithDecisionTimeout(10*time.Second)), done
}

// try posts a login from the address from and returns the response.
func try(h http.Handler, from, user, password string) *httptest.ResponseRecorder {
	form := url.Values{"user": {user}, "password": {password}}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	r.RemoteAddr = from
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The login recipe of docs/http.md: failures in a row per account and
// address, cleared by a success; attempts per address across accounts;
// attempts per account.
func Example_login() {
	limiter, done := loginLimiter()
	defer done()
	accounts := &passwords{users: map[string]string{"ada": "correct horse"}}
	login := loginHandler(limiter, accounts)

	from := "192.0.2.1:1234"
	show := func(user, password string) {
		w := try(login, from, user, password)
		fmt.Println(user, password, w.Code, w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String()))
	}
	show("ada", "guess 1")
	show("ada", "guess 2")
	show("ada", "correct horse") // ends the run of two failures
	for i := range 6 {
		show("ada", "guess "+strconv.Itoa(i+3))
	}
	show("ada", "correct horse") // five in a row: the password is not even checked
	from = "198.51.100.7:1234"
	show("ada", "correct horse") // another address: its own run
	// Output:
	// ada guess 1 401  wrong user or password
	// ada guess 2 401  wrong user or password
	// ada correct horse 200  welcome, ada
	// ada guess 3 401  wrong user or password
	// ada guess 4 401  wrong user or password
	// ada guess 5 401  wrong user or password
	// ada guess 6 401  wrong user or password
	// ada guess 7 401  wrong user or password
	// ada guess 8 429 900 too many login attempts
	// ada correct horse 429 900 too many login attempts
	// ada correct horse 200  welcome, ada
}

// A password spray from one address, 200 accounts by 5 passwords: the
// recipe checks 20 passwords (its per-address limit across accounts, at 5
// units a failure), not 1,000; from one IPv6 /48's many /64s alike. The
// users behind one address who log in successfully get 96 logins an
// hour, not 20.
func TestLoginSpray(t *testing.T) {
	for _, from := range []func(i int) string{
		func(int) string { return "203.0.113.5:4000" },
		func(i int) string { return fmt.Sprintf("[2001:db8:7:%x::1]:4000", i) }, // a new /64 each time
	} {
		limiter, done := loginLimiter()
		accounts := &passwords{users: map[string]string{"ada": "correct horse"}}
		login := loginHandler(limiter, accounts)
		n := 0
		for a := range 200 {
			for p := range 5 {
				try(login, from(n), fmt.Sprint("user", a), fmt.Sprint("password", p))
				n++
			}
		}
		if accounts.checks != 20 {
			t.Errorf("%s...: %d password checks of 1,000 attempts; want 20", from(0), accounts.checks)
		}
		done()
	}
	limiter, done := loginLimiter()
	defer done()
	users := map[string]string{}
	for i := range 97 {
		users[fmt.Sprint("user", i)] = "pw"
	}
	login := loginHandler(limiter, &passwords{users: users})
	for i := range 96 { // each reserves 5 of the 100 first
		if w := try(login, "203.0.113.5:4000", fmt.Sprint("user", i), "pw"); w.Code != 200 {
			t.Fatalf("success %d from one address: %d %s; want 200: a success costs 1 of its 100", i+1, w.Code, w.Body)
		}
	}
	if w := try(login, "203.0.113.5:4000", "user96", "pw"); w.Code != 429 {
		t.Errorf("the 97th login from one address within the hour: %d; want 429", w.Code)
	}
}

// Four addresses with 5 failures each on one account do not lock its
// owner out, and a success does not hand an attacker fresh guesses: it
// ends the run of failures from its own address only.
func TestLoginLockout(t *testing.T) {
	limiter, done := loginLimiter()
	defer done()
	accounts := &passwords{users: map[string]string{"ada": "correct horse"}}
	login := loginHandler(limiter, accounts)
	for i := range 4 {
		for p := range 5 {
			if w := try(login, fmt.Sprintf("198.51.100.%d:4000", i+1), "ada", fmt.Sprint("guess", p)); w.Code != 401 {
				t.Fatalf("attacker %d, guess %d: %d; want 401", i, p, w.Code)
			}
		}
		if w := try(login, fmt.Sprintf("198.51.100.%d:4000", i+1), "ada", "guess"); w.Code != 429 {
			t.Errorf("attacker %d's 6th failure in a row: %d; want 429", i, w.Code)
		}
	}
	if w := try(login, "192.0.2.1:4000", "ada", "correct horse"); w.Code != 200 {
		t.Errorf("the owner after 4 x 5 failures: %d; want 200", w.Code)
	}
	// The account-wide count was not cleared by the owner's success: 21
	// attempts so far (a denied one counts nowhere), and 80 more by 16
	// other addresses pass its 100.
	for i := range 16 {
		for p := range 5 {
			try(login, fmt.Sprintf("203.0.113.%d:4000", i+1), "ada", fmt.Sprint("guess", p))
		}
	}
	if w := try(login, "192.0.2.1:4000", "ada", "correct horse"); w.Code != 429 {
		t.Errorf("after 100 attempts on the account: %d; want 429, the lockout docs/http.md states", w.Code)
	}
}

// TestDocsLoginIsExample keeps docs/http.md's login recipe the same code as
// loginHandler, which Example_login runs.
func TestDocsLoginIsExample(t *testing.T) {
	readmetest.Check(t, "login_example_test.go", "../docs/http.md", "login")
}
