//go:build !unix

package main

import (
	"net"
	"testing"
)

// closedAddr returns a 127.0.0.1 address nothing listens on (probed free and
// released: elsewhere than unix another process may take it in between).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
