//go:build unix

package main

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// closedAddr returns a 127.0.0.1 address that refuses connections until the
// test ends. A port probed free and released could be taken by another test
// process's server before the test dials it; here a socket stays bound to it,
// never listening and without SO_REUSEADDR, so that no other socket can bind
// it and a dial is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

func TestClosedAddrHoldsItsPort(t *testing.T) {
	addr := closedAddr(t)
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("another socket could listen on %s", addr)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		_ = c.Close()
		t.Fatalf("a dial to %s connected", addr)
	}
}
