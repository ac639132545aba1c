package grpclimit_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
)

// messages is a ServerStream of a client that sends n messages.
type messages struct {
	grpc.ServerStream
	ctx    context.Context
	n      int
	header metadata.MD
}

func (m *messages) Context() context.Context { return m.ctx }
func (m *messages) SetHeader(md metadata.MD) error {
	m.header = metadata.Join(m.header, md)
	return nil
}
func (m *messages) RecvMsg(any) error {
	if m.n == 0 {
		return io.EOF
	}
	m.n--
	return nil
}

func peerCtx(addr string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 4000}})
}

// receive runs a handler that receives until an error behind interceptor:
// how many messages it got, and the stream's error.
func receive(interceptor grpc.StreamServerInterceptor, n int) (int, error) {
	got := 0
	err := interceptor(nil, &messages{ctx: peerCtx("192.0.2.1"), n: n}, &grpc.StreamServerInfo{FullMethod: "/pkg.Svc/Upload"}, func(_ any, ss grpc.ServerStream) error {
		for {
			if err := ss.RecvMsg(nil); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			got++
		}
	})
	return got, err
}

// A stream takes one unit whatever it carries; StreamMessages charges
// each message received, and a message past the limit ends the stream.
func TestStreamMessages(t *testing.T) {
	e := newEnv(t)
	in, err := grpclimit.New(grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := receive(in.StreamMessages(nil), 5); got != 2 || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("StreamMessages: %d messages, %v; want 2 (the open took 1 of 3), then ResourceExhausted", got, err)
	}
	e.mr.FlushAll()
	if got, err := receive(in.Stream(), 5); got != 5 || err != nil {
		t.Errorf("Stream: %d messages, %v; want all 5 for one unit", got, err)
	}
	e.mr.FlushAll()
	byLen := func(_ string, m any) int64 { return 2 } // a cost function: 2 units a message
	if got, err := receive(in.StreamMessages(byLen), 5); got != 1 || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("StreamMessages(2 a message): %d messages, %v; want 1, then ResourceExhausted", got, err)
	}
}

// Behind Envoy every call comes from the proxy: PeerIP with its address
// walks x-forwarded-for from the right, as httplimit.ClientIP does, and a
// client's own entry is never reached.
func TestPeerIPTrustedProxies(t *testing.T) {
	f, err := grpclimit.PeerIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ peer, xff, want string }{
		{"10.0.0.1", "1.2.3.4, 203.0.113.9", "ip:203.0.113.9"}, // a forged entry, then the client
		{"10.0.0.1", "203.0.113.7", "ip:203.0.113.7"},
		{"198.51.100.2", "203.0.113.9", "ip:198.51.100.2"}, // not the proxy: its header is not believed
		{"10.0.0.1", "64:ff9b::c000:221", "ip:192.0.2.33"}, // NAT64: the IPv4 client
	} {
		ctx := metadata.NewIncomingContext(peerCtx(tc.peer), metadata.Pairs("x-forwarded-for", tc.xff))
		if got, err := f(ctx, "/pkg.Svc/Get"); err != nil || got != tc.want {
			t.Errorf("peer %s, x-forwarded-for %q: %q, %v; want %q", tc.peer, tc.xff, got, err, tc.want)
		}
	}
	for _, c := range []struct {
		ip   grpclimit.PeerIP
		want string
	}{
		{grpclimit.PeerIP{Header: "x-forwarded-for"}, "but no TrustedProxies"},
		{grpclimit.PeerIP{TrustedProxies: []string{"10.0.0.1"}}, "but no Header"},
		{grpclimit.PeerIP{Header: "x-forwarded-for", TrustedProxies: []string{"10.0.0.0/8"}}, `trusted proxy "10.0.0.0/8" spans more than a /24`},
	} {
		if _, err := c.ip.KeyFunc(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error with %q", c.ip, err, c.want)
		}
	}
}

// Two interceptors in a chain both report: the metadata list each one's
// policy and quota.
func TestStackedInterceptorsMetadata(t *testing.T) {
	e := newEnv(t)
	l := testLimiter(e.rdb)
	outer, err := grpclimit.New(grpclimit.Config{Limiter: l, Name: "per-ip", Limits: []redisrate.Limit{redisrate.PerMinute(10)}})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := grpclimit.New(grpclimit.Config{Limiter: l, Name: "per-app", Limits: []redisrate.Limit{redisrate.PerMinute(5)}})
	if err != nil {
		t.Fatal(err)
	}
	ss := &messages{ctx: peerCtx("192.0.2.1")}
	info := &grpc.StreamServerInfo{FullMethod: "/pkg.Svc/Get"}
	err = outer.Stream()(nil, ss, info, func(srv any, s grpc.ServerStream) error {
		return inner.Stream()(srv, s, info, func(any, grpc.ServerStream) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ss.header.Get("ratelimit-policy"); len(got) != 2 || got[0] != `"per-ip";q=10;w=60` || got[1] != `"per-app";q=5;w=60` {
		t.Errorf("ratelimit-policy %q; want both policies", got)
	}
	if got := ss.header.Get("ratelimit"); len(got) != 2 {
		t.Errorf("ratelimit %q; want both limits", got)
	}
}
