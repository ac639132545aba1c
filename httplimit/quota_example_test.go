package httplimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/ratecore"
)

// One quota on a route for all its clients, and every process that serves
// it: an upstream geocoder that allows the whole service 40 calls an hour.
// With no Limits, the quota alone holds each request (no client key is
// needed); a request it refuses gets 429 with the quota's wait, its Key
// as the violated policy and its RateLimit fields. On shutdown, Close
// gives back what the process's lease has not spent (the default lease of
// an hourly quota this small is one unit for a second: nothing is kept).
// One middleware, not two chained: the quota counts only the requests it
// serves.
func ExampleConfig_quotaAlone() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	geocode, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "geocode",
		Quota:   &ratecore.Quota{Key: "geocoder", Limit: redisrate.PerHour(40)},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := geocode.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") }))
	codes := map[int]int{}
	var refused *httptest.ResponseRecorder
	for i := range 50 {
		r := httptest.NewRequest("GET", "/geocode", nil)
		r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", i+1) // 50 clients
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[w.Code]++
		refused = w
	}
	fmt.Println("served", codes[200], "refused", codes[429])
	fmt.Println("Retry-After:", refused.Header().Get("Retry-After"), "RateLimit:", refused.Header().Get("RateLimit"))
	fmt.Print(refused.Body.String())

	ctx := context.Background() // on shutdown, after http.Server.Shutdown
	if err := geocode.Close(ctx); err != nil {
		log.Print(err)
	}
	if err := limiter.Close(ctx); err != nil {
		log.Print(err)
	}
	// Output:
	// served 40 refused 10
	// Retry-After: 90 RateLimit: "geocoder";r=0;t=90
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"Too many requests: retry in 90 s.","violated-policies":["geocoder"]}
}
