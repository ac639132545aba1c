package httplimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc returns the key that identifies the client of r, such as its IP
// address or its API key; the middleware keeps one rate-limit state per key.
//
// An error that wraps ErrNoKey means that the request does not identify its
// client (a missing API key): it is the client's fault, and the middleware
// answers 400 Bad Request, showing the error's text to the client. Any other
// error is the server's fault: 500, its text not shown (see
// Config.OnError). An empty key is an error too (it wraps ErrNoKey): a
// missing identity must never mean "no limit". To exempt requests, use
// Config.Exempt.
type KeyFunc func(r *http.Request) (string, error)

// KeyFunc returns f itself, so that a KeyFunc is a Keyer.
func (f KeyFunc) KeyFunc() (KeyFunc, error) {
	if f == nil {
		return nil, errors.New("httplimit: nil KeyFunc")
	}
	return f, nil
}

// Keyer is a configuration of a KeyFunc, checked once by New: ClientIP,
// APIKey, or a KeyFunc itself.
type Keyer interface {
	// KeyFunc returns the function that keys requests, or why the
	// configuration is wrong.
	KeyFunc() (KeyFunc, error)
}

// ErrNoKey is matched by KeyFunc errors that mean the request carries no
// usable key, such as a missing API key header.
var ErrNoKey = errors.New("no rate-limit key")

// MinSecretLen is the shortest APIKey.Secret accepted: 16 bytes (128 bits).
const MinSecretLen = 16

// APIKey keys requests by an API key that the client sends in a header,
// such as "X-API-Key". The key is never stored in Redis: the Redis key
// holds HMAC-SHA256(Secret, API key), so that someone who can read Redis
// cannot recover API keys, not even short ones by trying them all, without
// the secret. A request without the header, or with it more than once
// (which another layer might read differently), gets an error that wraps
// ErrNoKey.
type APIKey struct {
	// Header is the request header that holds the API key. Required.
	Header string

	// Secret keys the HMAC: at least MinSecretLen random bytes, kept out
	// of the code (an environment variable, a secret store). Every process
	// that limits the same clients needs the same Secret; a new Secret
	// starts every client afresh.
	Secret []byte
}

// Header returns the APIKey that keys requests by the header name,
// hashed with secret.
func Header(name string, secret []byte) APIKey {
	return APIKey{Header: name, Secret: secret}
}

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	canonical := http.CanonicalHeaderKey(strings.TrimSpace(k.Header))
	if canonical == "" {
		return nil, errors.New("httplimit: APIKey has no Header: name the header that holds the API key")
	}
	if len(k.Secret) < MinSecretLen {
		return nil, fmt.Errorf("httplimit: APIKey.Secret has %d bytes: give at least %d random bytes, kept out of the code", len(k.Secret), MinSecretLen)
	}
	secret := append([]byte(nil), k.Secret...)
	return func(r *http.Request) (string, error) {
		values := r.Header.Values(canonical)
		switch {
		case len(values) == 0 || values[0] == "":
			return "", fmt.Errorf("%w: the request has no %s header", ErrNoKey, canonical)
		case len(values) > 1:
			return "", fmt.Errorf("%w: the request has %d %s headers; send one", ErrNoKey, len(values), canonical)
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(values[0]))
		return "key:" + hex.EncodeToString(mac.Sum(nil)[:16]), nil
	}, nil
}

// ClientIP keys requests by the client's IP address. The zero ClientIP uses
// the address of the connection (http.Request.RemoteAddr), which a client
// cannot forge.
//
// Behind reverse proxies or load balancers, every request comes from a
// proxy: name the header they set (Header) and their addresses
// (TrustedProxies). The header is believed only as far as trusted hops
// vouch for it: starting from the connection's address, ClientIP walks the
// header's addresses from the right, skipping trusted proxies, and takes the
// first address that is not one. What a client writes into the header
// itself sits to the left of that and is never reached, so it cannot spoof
// another address (the classic hole of taking the leftmost address). If
// every hop is trusted, the leftmost one is the client; if a hop cannot be
// parsed ("unknown", an obfuscated identifier), the last trusted hop is.
//
// Name the header your proxies actually set: a header they merely pass along
// is whatever the client wants it to be.
type ClientIP struct {
	// Header is the forwarding header the trusted proxies append to or set:
	// "X-Forwarded-For", "Forwarded" (RFC 7239, its for= parameters), or a
	// single-address header such as "X-Real-IP". Empty: the connection's
	// address only.
	Header string

	// TrustedProxies are the addresses of the proxies, as CIDR prefixes
	// ("10.0.0.0/8", "2001:db8::/32") or single addresses ("192.0.2.7").
	// Required with Header, and only with it.
	TrustedProxies []string

	// IPv6Prefix is how many leading bits of an IPv6 address make the key.
	// The default, 0, means 64: one customer usually holds a whole /64 and
	// could otherwise rotate through its addresses. 128 keys each address.
	IPv6Prefix int
}

// KeyFunc checks c and returns its KeyFunc. Keys look like "ip:192.0.2.1"
// or "ip:2001:db8:1:2::/64".
func (c ClientIP) KeyFunc() (KeyFunc, error) {
	header := http.CanonicalHeaderKey(strings.TrimSpace(c.Header))
	var trusted []netip.Prefix
	for _, s := range c.TrustedProxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		trusted = append(trusted, p)
	}
	switch {
	case header == "" && len(trusted) > 0:
		return nil, errors.New("httplimit: ClientIP has TrustedProxies but no Header: name the header the proxies set")
	case header != "" && len(trusted) == 0:
		return nil, fmt.Errorf("httplimit: ClientIP has Header %q but no TrustedProxies: any client could set it; list the proxies' addresses", header)
	}
	bits := c.IPv6Prefix
	if bits == 0 {
		bits = 64
	}
	if bits < 1 || bits > 128 {
		return nil, fmt.Errorf("httplimit: invalid ClientIP.IPv6Prefix %d: must be between 1 and 128 (0 means 64)", c.IPv6Prefix)
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	forwarded := header == "Forwarded"
	return func(r *http.Request) (string, error) {
		client, ok := parseHop(r.RemoteAddr)
		if !ok {
			return "", fmt.Errorf("httplimit: cannot parse the connection's address %q", r.RemoteAddr)
		}
		if header != "" && isTrusted(client) {
			var hops []string
			if forwarded {
				hops = forwardedFor(r.Header.Values(header))
			} else {
				for _, v := range r.Header.Values(header) {
					hops = append(hops, strings.Split(v, ",")...)
				}
			}
			for i := len(hops) - 1; i >= 0; i-- {
				a, ok := parseHop(hops[i])
				if !ok {
					break
				}
				client = a
				if !isTrusted(a) {
					break
				}
			}
		}
		if client.Is6() {
			p, _ := client.Prefix(bits)
			if bits < 128 {
				return "ip:" + p.String(), nil
			}
		}
		return "ip:" + client.String(), nil
	}, nil
}

// parsePrefix reads a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("httplimit: invalid trusted proxy %q: must be a CIDR prefix such as 10.0.0.0/8 or an address", s)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("httplimit: invalid trusted proxy %q: must be a CIDR prefix such as 10.0.0.0/8 or an address", s)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parseHop reads one address as proxies write them: "192.0.2.1",
// "192.0.2.1:4711", "2001:db8::1", "[2001:db8::1]:4711", with spaces or
// quotes around.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
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
