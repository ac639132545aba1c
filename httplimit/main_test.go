package httplimit_test

import (
	"os"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/testtimeout"
)

// TestMain gives the Limiters the tests make a decision timeout that
// miniredis's Lua, under the race detector on a busy machine, always meets
// (200 ms, the default, is not: a slow call would be an outage).
func TestMain(m *testing.M) {
	testtimeout.DecisionTimeout = 10 * time.Second
	os.Exit(m.Run())
}
