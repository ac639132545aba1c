package ratecore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// IP is how a transport keys a client by its IP address
// (httplimit.ClientIP, grpclimit.PeerIP: defined types of IP, with its
// fields). The zero IP takes the connection's address (the peer's), which
// a client cannot forge.
//
// Behind reverse proxies or load balancers, every request comes from a
// proxy: name the header (in gRPC, the metadata key) they set (Header) and
// their own addresses (TrustedProxies). The header is believed only as far
// as trusted hops vouch for it: starting from the connection's address,
// the walk reads the header's addresses from the right, skipping trusted
// proxies, and takes the first address that is not one. What a client
// writes into the header itself sits to the left of that and is never
// reached, so it cannot spoof another address (the classic hole of taking
// the leftmost address). If every hop is trusted, the leftmost one is the
// client; if a hop cannot be parsed ("unknown", an obfuscated identifier),
// the last trusted hop is.
//
// Every host in a trusted range can write the header and choose its key:
// list the proxies' own addresses, not the network they share with the
// services (in Kubernetes, the ingress's addresses, not the pod network).
// A range wider than /24 (IPv4) or /64 (IPv6) is refused unless
// TrustWideRanges says otherwise. Name the header your proxies actually
// set: a header they merely pass along is whatever the client wants it to
// be.
//
// IPv6 clients are keyed by their /64 (IPv6Prefix): a customer given a /56
// holds 256 of them, and so 256 times the limit, unless IPv6Prefix is 56.
// The addresses that stand for an IPv4 client are keyed as that client:
// NAT64 (64:ff9b::/96, and RFC 8215's 64:ff9b:1::/48 by its /96 networks)
// by the embedded IPv4 address, Teredo (2001::/32) by the client's public
// IPv4 address, the IPv4-compatible ::a.b.c.d by a.b.c.d. Keys look like
// "ip:192.0.2.1" or "ip:2001:db8:1:2::/64".
type IP struct {
	// Header is the forwarding header (in gRPC, the metadata key) the
	// trusted proxies append to or set: "X-Forwarded-For", "Forwarded"
	// (RFC 7239, its for= parameters), or a single-address one such as
	// "X-Real-IP" or "x-envoy-external-address"; in any case. Empty: the
	// connection's address only.
	Header string

	// TrustedProxies are the addresses of the proxies, as single
	// addresses ("192.0.2.7") or narrow CIDR prefixes ("192.0.2.0/28",
	// "2001:db8::/120"): the proxies' own, never a network they share
	// with clients or other services. Required with Header, and only with
	// it.
	TrustedProxies []string

	// TrustWideRanges accepts trusted prefixes wider than /24 (IPv4) or
	// /64 (IPv6). Every host in a trusted range can write the header and
	// choose its key, so by default such a range is refused: list the
	// proxies' own addresses.
	TrustWideRanges bool

	// IPv6Prefix is how many leading bits of an IPv6 address make the key.
	// The default, 0, means 64: one customer usually holds a whole /64 and
	// could otherwise rotate through its addresses. A customer given a /56
	// (or /48) holds 256 (65,536) /64s, each its own limit: set 56 (or 48)
	// where that matters more than neighbours sharing one. 128 keys each
	// address.
	IPv6Prefix int
}

// KeyFunc checks c and returns its key function: the key of a connection
// from conn ("192.0.2.1:4711", "[2001:db8::1]:4711" or an address alone)
// whose forwarding header (Header) has the values header.
func (c IP) KeyFunc() (func(conn string, header []string) (string, error), error) {
	var trusted []netip.Prefix
	for _, s := range c.TrustedProxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		if wide := 24 + 40*btoi(p.Addr().Is6()); p.Bits() < wide && !c.TrustWideRanges {
			return nil, fmt.Errorf("trusted proxy %q spans more than a /%d: every host in it could write the header and choose its key; list the proxies' own addresses (or set TrustWideRanges)", s, wide)
		}
		trusted = append(trusted, p)
	}
	switch {
	case c.Header == "" && len(trusted) > 0:
		return nil, errors.New("trusted proxies (TrustedProxies) but no Header: name the header the proxies set")
	case c.Header != "" && len(trusted) == 0:
		return nil, fmt.Errorf("a header (Header %q) but no TrustedProxies: any client could set it; list the proxies' addresses", c.Header)
	}
	bits := c.IPv6Prefix
	if bits == 0 {
		bits = 64
	}
	if bits < 1 || bits > 128 {
		return nil, fmt.Errorf("invalid IPv6Prefix %d: must be between 1 and 128 (0 means 64)", c.IPv6Prefix)
	}
	forwarded := strings.EqualFold(c.Header, "forwarded")
	return func(conn string, header []string) (string, error) {
		client, ok := parseHop(conn)
		if !ok {
			return "", fmt.Errorf("cannot parse the connection's address %q", conn)
		}
		if len(trusted) > 0 && inAny(trusted, client) {
			client = walk(client, hops(header, forwarded), trusted)
		}
		return ipKey(client, bits), nil
	}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func inAny(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walk is the client behind client, a trusted proxy, that hops (the
// header's addresses, the nearest last) name: the first untrusted one
// from the right, or the last that parses.
func walk(client netip.Addr, hops []string, trusted []netip.Prefix) netip.Addr {
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break
		}
		client = a
		if !inAny(trusted, a) {
			break
		}
	}
	return client
}

// hops are the addresses of the header's values, in order.
func hops(values []string, forwarded bool) []string {
	if forwarded {
		return forwardedFor(values)
	}
	var out []string
	for _, v := range values {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// The IPv6 ranges that carry a client's IPv4 address.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: the IPv4 address in the last 32 bits
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215, local use: its /96 networks, the same way
	teredo     = netip.MustParsePrefix("2001::/32")      // RFC 4380: the client's, inverted, in the last 32 bits
	v4Compat   = netip.MustParsePrefix("::/96")          // RFC 4291's deprecated IPv4-compatible ::a.b.c.d (but :: and ::1)
)

// embedsIPv4 reports an IPv6 address that stands for an IPv4 client, in
// its last 32 bits.
func embedsIPv4(a netip.Addr) bool {
	if !a.Is6() {
		return false
	}
	if v4Compat.Contains(a) {
		return !a.IsLoopback() && !a.IsUnspecified()
	}
	return nat64.Contains(a) || nat64Local.Contains(a) || teredo.Contains(a)
}

// ipKey is the key of address a: an IPv4 address itself, an IPv6 one by
// its first bits. An IPv6 address that stands for an IPv4 client is keyed
// as that client: NAT64 (the well-known prefix and RFC 8215's local-use
// one) by the embedded address, or all its users would share one /64;
// Teredo by the client's public address, or all the clients of one relay
// would share a key; ::a.b.c.d by a.b.c.d, or it would share ::1's /64.
func ipKey(a netip.Addr, bits int) string {
	if embedsIPv4(a) {
		b := a.As16()
		v4 := [4]byte{b[12], b[13], b[14], b[15]}
		if teredo.Contains(a) {
			for i := range v4 {
				v4[i] ^= 0xff
			}
		}
		a = netip.AddrFrom4(v4)
	}
	if a.Is6() && bits < 128 {
		p, _ := a.Prefix(bits)
		return "ip:" + p.String()
	}
	return "ip:" + a.String()
}

// parsePrefix reads a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("invalid trusted proxy %q: must be a CIDR prefix such as 192.0.2.0/28 or an address", s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, bad
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, bad
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parseHop reads one address as proxies write them: "192.0.2.1",
// "192.0.2.1:4711", "2001:db8::1", "[2001:db8::1]:4711", with spaces or
// quotes around.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// forwardedFor returns the for= value of each element of the Forwarded
// header lines (RFC 7239), in order; an element without one gives "", which
// parseHop refuses. Quoted strings may hold commas and semicolons.
func forwardedFor(lines []string) []string {
	var out []string
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			if strings.TrimSpace(elem) == "" {
				continue
			}
			val := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, v, ok := strings.Cut(pair, "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					val = unquote(strings.TrimSpace(v))
					break
				}
			}
			out = append(out, val)
		}
	}
	return out
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	inQuote, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == sep && !inQuote:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote undoes an RFC 7230 quoted-string; other values are returned as is.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// minSecretLen is the shortest APIKey.Secret accepted: 16 bytes (128
// bits), which no one tries all of.
const minSecretLen = 16

// APIKey is how a transport keys a client by an API key it sends
// (httplimit.APIKey, grpclimit.APIKey: defined types of APIKey, with its
// fields). The key is never stored in Redis: the Redis key holds
// HMAC-SHA256(Secret, API key), its first 16 bytes in hex after "key:", so
// that someone who can read Redis cannot recover API keys, not even short
// ones by trying them all, without the secret. A request without the key,
// or with it more than once (which another layer might read differently),
// gets an error that wraps ErrNoKey.
//
// A key the service never issued must not buy a limit of its own: each
// invented key would be a fresh quota, and a fresh key in Redis. Give
// Verify, or put the middleware after authentication (which refuses
// unknown keys) and say so with Authenticated; an APIKey with neither is
// refused when the middleware is made.
type APIKey struct {
	// Header is the HTTP header, or the gRPC metadata key, that holds the
	// API key, such as "X-API-Key" (in any case). Required.
	Header string

	// Secret keys the HMAC: at least 16 random bytes, kept out of the
	// code (an environment variable, a secret store). Every process that
	// limits the same clients needs the same Secret; a new Secret starts
	// every client afresh.
	Secret []byte

	// Verify reports whether key is one the service issued: a lookup in
	// its key store, best cached. A request whose key it refuses gets an
	// error that wraps ErrNoKey (400, codes.InvalidArgument) and writes
	// nothing to Redis; its own error is the server's fault (500,
	// codes.Internal).
	Verify func(ctx context.Context, key string) (bool, error)

	// Authenticated says that the middleware runs after authentication,
	// which refuses unknown keys before they come here: Verify may then be
	// nil.
	Authenticated bool
}

// KeyFunc checks k and returns its key function: the key of a request
// whose Header has the values values, source naming it in errors (such as
// "X-Api-Key header"). A request without the key, or with it more than
// once (which another layer might read differently), gets an error that
// wraps ErrNoKey. Keys look like "key:" and 32 hex digits.
func (k APIKey) KeyFunc() (func(ctx context.Context, source string, values []string) (string, error), error) {
	if strings.TrimSpace(k.Header) == "" {
		return nil, errors.New("APIKey has no Header: name the header (in gRPC, the metadata key) that holds the API key")
	}
	if len(k.Secret) < minSecretLen {
		return nil, fmt.Errorf("APIKey.Secret has %d bytes: give at least %d random bytes, kept out of the code", len(k.Secret), minSecretLen)
	}
	if k.Verify == nil && !k.Authenticated {
		return nil, errors.New("APIKey has no Verify: a key the service never issued would get a fresh limit, and a key in Redis, of its own; give Verify, or put the middleware after authentication and set Authenticated")
	}
	secret, verify := append([]byte(nil), k.Secret...), k.Verify
	return func(ctx context.Context, source string, values []string) (string, error) {
		switch {
		case len(values) == 0 || values[0] == "":
			return "", fmt.Errorf("%w: no %s", ErrNoKey, source)
		case len(values) > 1:
			return "", fmt.Errorf("%w: %d %s values; send one", ErrNoKey, len(values), source)
		}
		if verify != nil {
			ok, err := verify(ctx, values[0])
			if err != nil {
				return "", fmt.Errorf("APIKey.Verify: %w", err)
			}
			if !ok {
				return "", fmt.Errorf("%w: the %s is not a key this service issued", ErrNoKey, source)
			}
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(values[0]))
		return "key:" + hex.EncodeToString(mac.Sum(nil)[:16]), nil
	}, nil
}
