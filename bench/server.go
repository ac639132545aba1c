package main

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/redisrate/redisrate/bench/internal/redisserver"
)

// startRedis starts redis-server (bin on PATH) on a free 127.0.0.1 port,
// without persistence, and returns it once it is ready and surely on its
// own port.
func startRedis(bin string) (*redisserver.Server, error) {
	srv, err := redisserver.Start(redisserver.Options{Bin: bin})
	if errors.Is(err, exec.ErrNotFound) {
		return nil, fmt.Errorf("no %s on PATH (install redis-server, or pass --redis ADDR): %w", bin, err)
	}
	return srv, err
}
