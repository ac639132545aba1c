package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/redisrate/redisrate/ratecore"
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
// usable key, such as a missing API key header. It is ratecore.ErrNoKey,
// which grpclimit's ErrNoKey is too.
var ErrNoKey = ratecore.ErrNoKey

// MinSecretLen is the shortest APIKey.Secret accepted: 16 bytes (128 bits).
const MinSecretLen = ratecore.MinSecretLen

// APIKey keys requests by an API key that the client sends in a header,
// such as "X-API-Key". The key is never stored in Redis: the Redis key
// holds HMAC-SHA256(Secret, API key), so that someone who can read Redis
// cannot recover API keys, not even short ones by trying them all, without
// the secret. A request without the header, or with it more than once
// (which another layer might read differently), gets an error that wraps
// ErrNoKey.
//
// A key the service never issued must not buy a limit of its own: each
// invented key would be a fresh quota, and a fresh key in Redis. Give
// Verify, or put the middleware after authentication (which refuses
// unknown keys) and say so with Authenticated; New refuses an APIKey with
// neither.
type APIKey struct {
	// Header is the request header that holds the API key. Required.
	Header string

	// Secret keys the HMAC: at least MinSecretLen random bytes, kept out
	// of the code (an environment variable, a secret store). Every process
	// that limits the same clients needs the same Secret; a new Secret
	// starts every client afresh.
	Secret []byte

	// Verify reports whether key is one the service issued: a lookup in
	// its key store, best cached. A request whose key it refuses gets 400
	// (an error that wraps ErrNoKey), and writes nothing to Redis; its
	// error gets 500.
	Verify func(ctx context.Context, key string) (bool, error)

	// Authenticated says that the middleware runs after authentication,
	// which refuses unknown keys before they come here: Verify may then be
	// nil.
	Authenticated bool
}

// Header returns the APIKey that keys requests by the header name,
// hashed with secret, its keys checked by verify.
func Header(name string, secret []byte, verify func(ctx context.Context, key string) (bool, error)) APIKey {
	return APIKey{Header: name, Secret: secret, Verify: verify}
}

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	canonical := http.CanonicalHeaderKey(strings.TrimSpace(k.Header))
	if canonical == "" {
		return nil, errors.New("APIKey has no Header: name the header that holds the API key")
	}
	key, err := ratecore.APIKey{Secret: k.Secret, Verify: k.Verify, Authenticated: k.Authenticated}.KeyFunc()
	if err != nil {
		return nil, err
	}
	source := canonical + " header"
	return func(r *http.Request) (string, error) {
		return key(r.Context(), source, r.Header.Values(canonical))
	}, nil
}

// ClientIP keys requests by the client's IP address. The zero ClientIP uses
// the address of the connection (http.Request.RemoteAddr), which a client
// cannot forge.
//
// Behind reverse proxies or load balancers, every request comes from a
// proxy: name the header they set (Header) and their own addresses
// (TrustedProxies). The header is believed only as far as trusted hops
// vouch for it: starting from the connection's address, ClientIP walks the
// header's addresses from the right, skipping trusted proxies, and takes the
// first address that is not one. What a client writes into the header
// itself sits to the left of that and is never reached, so it cannot spoof
// another address (the classic hole of taking the leftmost address). If
// every hop is trusted, the leftmost one is the client; if a hop cannot be
// parsed ("unknown", an obfuscated identifier), the last trusted hop is.
//
// Every host in a trusted range can write the header and choose its key:
// list the proxies' own addresses, not the network they share with the
// services (in Kubernetes, the ingress's addresses, not the pod network).
// A range wider than /24 (IPv4) or /64 (IPv6) is refused unless
// TrustWideRanges says otherwise.
//
// Name the header your proxies actually set: a header they merely pass along
// is whatever the client wants it to be.
//
// IPv6 clients are keyed by their /64 (IPv6Prefix): a customer given a /56
// holds 256 of them, and so 256 times the limit, unless IPv6Prefix is 56.
// The addresses that stand for an IPv4 client are keyed as that client:
// NAT64 (64:ff9b::/96, and RFC 8215's 64:ff9b:1::/48 by its /96 networks)
// by the embedded IPv4 address, Teredo (2001::/32) by the client's public
// IPv4 address, the IPv4-compatible ::a.b.c.d by a.b.c.d.
type ClientIP struct {
	// Header is the forwarding header the trusted proxies append to or set:
	// "X-Forwarded-For", "Forwarded" (RFC 7239, its for= parameters), or a
	// single-address header such as "X-Real-IP". Empty: the connection's
	// address only.
	Header string

	// TrustedProxies are the addresses of the proxies, as single addresses
	// ("192.0.2.7") or narrow CIDR prefixes ("192.0.2.0/28",
	// "2001:db8::/120"). Required with Header, and only with it.
	TrustedProxies []string

	// TrustWideRanges accepts trusted prefixes wider than /24 (IPv4) or
	// /64 (IPv6), which every host in them can use to choose its key.
	TrustWideRanges bool

	// IPv6Prefix is how many leading bits of an IPv6 address make the key.
	// The default, 0, means 64: one customer usually holds a whole /64 and
	// could otherwise rotate through its addresses. A customer given a /56
	// (or /48) holds 256 (65,536) /64s, each its own limit: set 56 (or 48)
	// where that matters more than neighbours sharing one. 128 keys each
	// address.
	IPv6Prefix int
}

// KeyFunc checks c and returns its KeyFunc. Keys look like "ip:192.0.2.1"
// or "ip:2001:db8:1:2::/64".
func (c ClientIP) KeyFunc() (KeyFunc, error) {
	ip := ratecore.IP(c) // the same fields: ratecore walks the hops and groups the addresses
	ip.Header = http.CanonicalHeaderKey(strings.TrimSpace(c.Header))
	header := ip.Header
	key, err := ip.KeyFunc()
	if err != nil {
		return nil, fmt.Errorf("ClientIP: %w", err)
	}
	return func(r *http.Request) (string, error) {
		var values []string
		if header != "" {
			values = r.Header.Values(header)
		}
		return key(r.RemoteAddr, values)
	}, nil
}
