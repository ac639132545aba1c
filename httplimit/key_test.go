package httplimit

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redisrate/redisrate/ratecore"
)

func TestClientIP(t *testing.T) {
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.7"}
	for _, tc := range []struct {
		name   string
		c      ClientIP
		remote string
		hdr    []string
		want   string
	}{
		{"connection address", ClientIP{}, "198.51.100.9:5555", nil, "ip:198.51.100.9"},
		{"no proxies: the header is ignored", ClientIP{}, "198.51.100.9:5555", []string{"X-Forwarded-For", "203.0.113.1"}, "ip:198.51.100.9"},
		{"untrusted peer: its header is ignored",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "198.51.100.9:5555",
			[]string{"X-Forwarded-For", "203.0.113.1"}, "ip:198.51.100.9"},
		{"one trusted proxy",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Forwarded-For", "203.0.113.1"}, "ip:203.0.113.1"},
		{"spoofed entries to the left are never reached",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Forwarded-For", "1.1.1.1, 10.9.9.9, 203.0.113.1"}, "ip:203.0.113.1"},
		{"a chain of trusted proxies, on several header lines",
			ClientIP{Header: "x-forwarded-for", TrustedProxies: proxies, TrustWideRanges: true}, "192.0.2.7:443",
			[]string{"X-Forwarded-For", "1.1.1.1, 203.0.113.1", "X-Forwarded-For", "10.0.0.2,10.0.0.3"}, "ip:203.0.113.1"},
		{"every hop trusted: the leftmost is the client",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Forwarded-For", "10.0.0.5, 10.0.0.6"}, "ip:10.0.0.5"},
		{"trusted proxy without the header",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555", nil, "ip:10.1.2.3"},
		{"garbage after a trusted hop: the last trusted hop",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Forwarded-For", "203.0.113.1, nonsense, 10.0.0.9"}, "ip:10.0.0.9"},
		{"ports and brackets",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Forwarded-For", "203.0.113.1:4711, [2001:db8:ffff::1]:80"}, "ip:203.0.113.1"},
		{"IPv4-mapped proxy address",
			ClientIP{Header: "X-Forwarded-For", TrustedProxies: proxies, TrustWideRanges: true}, "[::ffff:10.1.2.3]:5555",
			[]string{"X-Forwarded-For", "203.0.113.1"}, "ip:203.0.113.1"},
		{"X-Real-IP",
			ClientIP{Header: "X-Real-IP", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"X-Real-IP", "203.0.113.1"}, "ip:203.0.113.1"},
		{"Forwarded (RFC 7239)",
			ClientIP{Header: "Forwarded", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"Forwarded", `for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.4;by=10.0.0.5`},
			"ip:2001:db8:cafe::/64"},
		{"Forwarded with quoted separators and case",
			ClientIP{Header: "Forwarded", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"Forwarded", `proto=https;by="a,b;c";FOR="203.0.113.5"`}, "ip:203.0.113.5"},
		{"Forwarded for=unknown stops at the last trusted hop",
			ClientIP{Header: "Forwarded", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"Forwarded", `for=203.0.113.1, for=unknown`}, "ip:10.1.2.3"},
		{"Forwarded element without for=",
			ClientIP{Header: "Forwarded", TrustedProxies: proxies, TrustWideRanges: true}, "10.1.2.3:5555",
			[]string{"Forwarded", `for=203.0.113.1, proto=http`}, "ip:10.1.2.3"},
		{"IPv6 client keyed by its /64", ClientIP{}, "[2001:db8:1:2:3:4:5:6]:443", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 prefix of one's own", ClientIP{IPv6Prefix: 48}, "[2001:db8:1:2:3:4:5:6]:443", nil, "ip:2001:db8:1::/48"},
		// Issue 38, finding 10: the /64s of a customer's /56 are one key with IPv6Prefix 56.
		{"IPv6 /56, one /64", ClientIP{IPv6Prefix: 56}, "[2001:db8:1:200::1]:443", nil, "ip:2001:db8:1:200::/56"},
		{"IPv6 /56, another /64", ClientIP{IPv6Prefix: 56}, "[2001:db8:1:2ff::1]:443", nil, "ip:2001:db8:1:200::/56"},
		{"IPv6 whole address", ClientIP{IPv6Prefix: 128}, "[2001:db8:1:2:3:4:5:6%eth0]:443", nil, "ip:2001:db8:1:2:3:4:5:6"},
		{"address without a port", ClientIP{}, "198.51.100.9", nil, "ip:198.51.100.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.c.KeyFunc()
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				r.Header.Add(tc.hdr[i], tc.hdr[i+1])
			}
			got, err := f(r)
			if err != nil || got != tc.want {
				t.Errorf("key = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestClientIPErrors(t *testing.T) {
	for _, tc := range []struct {
		c    ClientIP
		want string
	}{
		{ClientIP{TrustedProxies: []string{"10.0.0.1"}}, "no Header"},
		// A range that holds the services too: any of them could name
		// itself anyone (docs/http.md, Keys).
		{ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.0/8"}}, `trusted proxy "10.0.0.0/8" spans more than a /24`},
		{ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"2001:db8::/48"}}, `trusted proxy "2001:db8::/48" spans more than a /64`},
		{ClientIP{Header: "X-Forwarded-For"}, "no TrustedProxies"},
		{ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.0/33"}}, `invalid trusted proxy "10.0.0.0/33"`},
		{ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"proxy.local"}}, `invalid trusted proxy "proxy.local"`},
		{ClientIP{IPv6Prefix: 129}, "IPv6Prefix 129"},
		{ClientIP{IPv6Prefix: -1}, "IPv6Prefix -1"},
	} {
		if _, err := tc.c.KeyFunc(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v; want one containing %q", tc.c, err, tc.want)
		}
	}
	f, err := ClientIP{}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@unix-socket"
	if _, err := f(r); err == nil || errors.Is(err, ratecore.ErrNoKey) {
		t.Errorf("unparsable RemoteAddr: err = %v; want a server-side error", err)
	}
}

func TestTrustedIPv4MappedPrefix(t *testing.T) {
	f, err := ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"::ffff:10.1.2.0/120"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:80"
	r.Header.Set("X-Forwarded-For", "203.0.113.1")
	if got, _ := f(r); got != "ip:203.0.113.1" {
		t.Errorf("key = %q; want ip:203.0.113.1", got)
	}
}

// A caller inside a wide trusted range (a pod beside the ingress) could
// write X-Forwarded-For and be keyed as anyone: such a range is refused,
// and the proxies' own addresses are the walk's only trusted hops.
func TestTrustedProxiesWide(t *testing.T) {
	wide := ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.0/8"}}
	if _, err := wide.KeyFunc(); err == nil {
		t.Fatal("10.0.0.0/8 trusted without TrustWideRanges; want an error")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.44.0.7:5555" // a pod, not the ingress
	r.Header.Set("X-Forwarded-For", "1.2.3.4")
	narrow, err := ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.1", "10.0.0.2"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := narrow(r); got != "ip:10.44.0.7" {
		t.Errorf("a pod that writes X-Forwarded-For: key %q; want its own address, ip:10.44.0.7", got)
	}
	wide.TrustWideRanges = true
	if f, err := wide.KeyFunc(); err != nil {
		t.Errorf("TrustWideRanges: %v; want the range taken", err)
	} else if got, _ := f(r); got != "ip:1.2.3.4" {
		t.Errorf("TrustWideRanges: key %q; want the header's ip:1.2.3.4 (the risk it takes)", got)
	}
}

// IPv6 addresses that stand for an IPv4 client are keyed as that client:
// NAT64's users would otherwise share one /64, and Teredo's clients of one
// relay one key.
func TestIPv6EmbeddedIPv4(t *testing.T) {
	f, err := ClientIP{}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ remote, want string }{
		{"[64:ff9b::c000:221]:443", "ip:192.0.2.33"},
		{"[64:ff9b::c633:6407]:443", "ip:198.51.100.7"},
		// RFC 4380's example: server 65.54.227.120, client 192.0.2.45 (obfuscated 3fff:fdd2).
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd2]:443", "ip:192.0.2.45"},
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd1]:443", "ip:192.0.2.46"},
		{"[2001:db8:1:2::7]:443", "ip:2001:db8:1:2::/64"},
		// Issue 38, finding 10: RFC 8215's local-use NAT64 prefix was keyed
		// by its /64, which all its users share, and ::a.b.c.d shared ::1's.
		{"[64:ff9b:1::c000:221]:443", "ip:192.0.2.33"},
		{"[64:ff9b:1:abcd::c633:6407]:443", "ip:198.51.100.7"},
		{"[::c000:221]:443", "ip:192.0.2.33"},
		{"[::1]:443", "ip:::/64"},
		{"[::]:443", "ip:::/64"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got, err := f(r); err != nil || got != tc.want {
			t.Errorf("%s: key %q, %v; want %q", tc.remote, got, err, tc.want)
		}
	}
}
