package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// An answered request, as its client saw it.
type answered struct {
	start, end time.Time
	code       int
	err        error
}

func (a answered) took() time.Duration { return a.end.Sub(a.start) }

// TestOutageLatency is an outage as a newcomer meets it: the README's
// middleware in front of one route, 32 clients looping on it, then Redis
// shut down, or paused with CLIENT PAUSE 2500 ALL. Every request is
// answered (200, 429 or 503), and the decision timeout cuts the requests
// the outage would hold: most of those started in its first half are
// answered before it ends. Before the deadline existed, the requests in
// flight at a shutdown waited up to 950 ms (go-redis's dial retries) and a
// pause held them for all of its 2.5 s.
//
// The latencies are reported as FIGURES (targets: a median of a few ms,
// no request started during the outage over 350 ms), not asserted: on a
// loaded machine the scheduler alone moves them. Each client pauses 5 ms
// between requests, so that the test's own load does not saturate the
// machine's 2 cores and make the figures its own.
func TestOutageLatency(t *testing.T) {
	redistest.NeedLocal(t, "stops and pauses its server")
	for _, c := range []struct {
		client string
		opts   redis.Options
		outage string
	}{
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, "shutdown"},
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, "CLIENT PAUSE"},
		{"go-redis defaults", redis.Options{}, "shutdown"},
		{"go-redis defaults", redis.Options{}, "CLIENT PAUSE"},
	} {
		t.Run(c.outage+", "+c.client, func(t *testing.T) {
			srv := redistest.StartServer(t, redistest.Options{})
			admin := srv.Client(&redis.Options{MaxRetries: -1})
			opts := c.opts
			rdb := srv.Client(&opts)

			// The README's middleware, with 127.0.0.1 (the test's
			// clients) as the trusted proxy.
			byIP, err := httplimit.ClientIP{
				Header:         "X-Forwarded-For",
				TrustedProxies: []string{"127.0.0.1/32"},
			}.KeyFunc()
			if err != nil {
				t.Fatal(err)
			}
			limit, err := httplimit.New(httplimit.Config{
				Limiter: redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:")),
				Limits:  []redisrate.Limit{redisrate.PerSecond(2)},
				Key:     byIP,
				Name:    "api",
				// 503 while Redis is down, said explicitly: the middleware's
				// default serves (FailOpen).
				FailurePolicy: redisrate.FailClosed,
			})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("/things", limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "things")
			})))
			web := httptest.NewServer(mux)
			defer web.Close()

			const clients = 32
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
			defer hc.CloseIdleConnections()
			stop := make(chan struct{})
			var mu sync.Mutex
			var all []answered
			var wg sync.WaitGroup
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ip := fmt.Sprintf("198.51.100.%d", i+1)
					var mine []answered
					defer func() {
						mu.Lock()
						all = append(all, mine...)
						mu.Unlock()
					}()
					for {
						select {
						case <-stop:
							return
						default:
						}
						req, _ := http.NewRequest("GET", web.URL+"/things", nil)
						req.Header.Set("X-Forwarded-For", ip)
						a := answered{start: time.Now()}
						resp, err := hc.Do(req)
						a.end, a.err = time.Now(), err
						if err == nil {
							a.code = resp.StatusCode
							_ = resp.Body.Close()
						}
						mine = append(mine, a)
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}

			time.Sleep(500 * time.Millisecond) // healthy
			var began, over time.Time
			switch c.outage {
			case "shutdown":
				began = time.Now()
				srv.Stop()
				time.Sleep(2 * time.Second)
				over = time.Now()
				srv.Restart()
			default:
				began = time.Now()
				if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 2500, "ALL").Err(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2500 * time.Millisecond)
				over = time.Now()
			}
			time.Sleep(time.Second) // back
			close(stop)
			wg.Wait()

			var lat, after, inFlight []time.Duration
			codes := map[int]int{}
			for _, a := range all {
				if a.err != nil {
					t.Errorf("a request was not answered: %v", a.err)
					continue
				}
				codes[a.code]++
				lat = append(lat, a.took())
				switch {
				case !a.start.Before(began) && a.start.Before(over):
					after = append(after, a.took())
				case a.start.Before(began) && a.end.After(began):
					inFlight = append(inFlight, a.took())
				}
			}
			if len(after) == 0 {
				t.Fatal("no request was made during the outage")
			}
			slices.Sort(lat)
			slices.Sort(after)
			over350 := len(after) - slices.IndexFunc(after, func(d time.Duration) bool { return d > 350*time.Millisecond })
			if over350 > len(after) {
				over350 = 0
			}
			maxInFlight := time.Duration(0)
			if len(inFlight) > 0 {
				maxInFlight = slices.Max(inFlight)
			}
			redistest.Report(t, "outage "+c.outage+", "+c.client,
				"%d requests (%d 200, %d 429, %d 503), median %v, max %v; %d started during the outage: p99 %v, max %v, %d over 350 ms; in flight when it began: max %v",
				len(lat), codes[200], codes[429], codes[503], lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Millisecond),
				len(after), after[len(after)*99/100].Round(time.Millisecond), after[len(after)-1].Round(time.Millisecond), over350, maxInFlight.Round(time.Millisecond))
			for code := range codes {
				if code != 200 && code != 429 && code != 503 {
					t.Errorf("%d answers with status %d; want 200, 429 or 503", codes[code], code)
				}
			}
			if codes[503] == 0 {
				t.Error("no 503 during the outage: the outage did not happen")
			}
			// The latencies are FIGURES (above; targets: the median a few
			// ms, 350 ms for a request started during the outage), not
			// assertions: a loaded machine's scheduler alone moved the p99
			// past any bound that shows the deadline. What holds at any
			// load: the requests started in the outage's first half were
			// answered before it ended, most of them. Without the deadline
			// a pause held every one of them to its end.
			early, cut := 0, 0
			for _, a := range all {
				if a.err == nil && !a.start.Before(began) && a.start.Before(began.Add(over.Sub(began)/2)) {
					early++
					if a.end.Before(over) {
						cut++
					}
				}
			}
			if cut*2 < early {
				t.Errorf("%d of the %d requests started in the outage's first half were answered only after it ended: the decision timeout did not cut them", early-cut, early)
			}
		})
	}
}
