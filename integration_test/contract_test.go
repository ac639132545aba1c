package integration

import (
	"testing"

	"github.com/redisrate/redisrate/internal/contracttest"
)

// TestContractTables runs the contract's shared tables on a real Redis and
// its own Lua (the unit tests run them on miniredis's gopher-lua). Cases
// that move the clock are skipped here: a real clock cannot be moved.
func TestContractTables(t *testing.T) {
	r := openRedis(t)
	contracttest.Run(t, contracttest.Engine{Client: r.Client})
}
