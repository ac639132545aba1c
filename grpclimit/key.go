package grpclimit

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redisrate/redisrate/ratecore"
)

// ErrNoKey is matched by KeyFunc errors that mean the call carries no
// usable key, such as missing API key metadata: the client's fault, which
// the interceptors answer with codes.InvalidArgument. It is
// ratecore.ErrNoKey, which httplimit's ErrNoKey is too.
var ErrNoKey = ratecore.ErrNoKey

// MinSecretLen is the shortest APIKey.Secret accepted: 16 bytes.
const MinSecretLen = ratecore.MinSecretLen

// KeyFunc returns the key that identifies the client of a call to the full
// method name method ("/package.Service/Method"), from its context (peer,
// incoming metadata). An empty key is an error (it wraps ErrNoKey): to
// exempt calls, use Config.Exempt.
type KeyFunc func(ctx context.Context, method string) (string, error)

// KeyFunc returns f itself, so that a KeyFunc is a Keyer. New refuses a
// nil f.
func (f KeyFunc) KeyFunc() (KeyFunc, error) { return f, nil }

// Keyer is a configuration of a KeyFunc, checked once by New: PeerIP,
// APIKey, or a KeyFunc itself.
type Keyer interface {
	// KeyFunc returns the function that keys calls, or why the
	// configuration is wrong.
	KeyFunc() (KeyFunc, error)
}

// PeerIP keys calls by the IP address of the client, such as
// "ip:192.0.2.1", and IPv6 clients by their /64 (IPv6Prefix), but NAT64
// and Teredo addresses by the IPv4 client they stand for. The zero PeerIP
// takes the connection's peer address. Behind proxies (Envoy, a load
// balancer) every call comes from a proxy: name the metadata they set
// (Metadata, such as "x-forwarded-for") and their own addresses
// (TrustedProxies), and the client is found as httplimit.ClientIP finds
// it: the metadata's addresses read from the right, trusted proxies
// skipped, the first other address taken, so that what a client writes
// itself is never reached.
type PeerIP struct {
	// Metadata is the forwarding metadata key the trusted proxies append
	// to or set: "x-forwarded-for", "forwarded" (RFC 7239) or a
	// single-address one such as "x-envoy-external-address". Empty: the
	// peer address only.
	Metadata string

	// TrustedProxies are the proxies' own addresses, as single addresses
	// or narrow CIDR prefixes. Required with Metadata, and only with it.
	TrustedProxies []string

	// TrustWideRanges accepts trusted prefixes wider than /24 (IPv4) or
	// /64 (IPv6), which every host in them can use to choose its key.
	TrustWideRanges bool

	// IPv6Prefix is how many leading bits of an IPv6 address make the
	// key; 0 means 64. A customer given a /56 (or /48) holds 256 (65,536)
	// /64s, each its own limit: set 56 (or 48) where that matters more
	// than neighbours sharing one.
	IPv6Prefix int
}

// KeyFunc checks p and returns its KeyFunc.
func (p PeerIP) KeyFunc() (KeyFunc, error) {
	name := strings.ToLower(strings.TrimSpace(p.Metadata))
	key, err := ratecore.IP{Header: name, TrustedProxies: p.TrustedProxies, TrustWideRanges: p.TrustWideRanges, IPv6Prefix: p.IPv6Prefix}.KeyFunc()
	if err != nil {
		return nil, errors.New("PeerIP: " + strings.Replace(err.Error(), "Header", "Metadata", 1))
	}
	return func(ctx context.Context, _ string) (string, error) {
		pr, ok := peer.FromContext(ctx)
		if !ok || pr.Addr == nil {
			return "", errors.New("grpclimit: the call has no peer address")
		}
		var values []string
		if name != "" {
			md, _ := metadata.FromIncomingContext(ctx)
			values = md.Get(name)
		}
		return key(pr.Addr.String(), values)
	}, nil
}

// APIKey keys calls by an API key in the incoming metadata, such as
// "x-api-key". Only HMAC-SHA256(Secret, API key) reaches Redis, so that
// API keys cannot be read or recovered from it. A call without the key, or
// with it more than once, gets an error that wraps ErrNoKey.
//
// A key the service never issued must not buy a limit of its own: give
// Verify, or put the interceptors after authentication (which refuses
// unknown keys) and say so with Authenticated; New refuses an APIKey with
// neither.
type APIKey struct {
	// Metadata is the metadata key that holds the API key. Required.
	Metadata string
	// Secret keys the HMAC: at least MinSecretLen random bytes, kept out
	// of the code.
	Secret []byte
	// Verify reports whether key is one the service issued (a lookup in
	// its key store, best cached). A call whose key it refuses fails with
	// codes.InvalidArgument (an error that wraps ErrNoKey) and writes
	// nothing to Redis; its error fails the call with codes.Internal.
	Verify func(ctx context.Context, key string) (bool, error)
	// Authenticated says that the interceptors run after authentication,
	// which refuses unknown keys: Verify may then be nil.
	Authenticated bool
}

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	key, err := ratecore.APIKey{Secret: k.Secret, Verify: k.Verify, Authenticated: k.Authenticated}.KeyFunc()
	name := strings.ToLower(strings.TrimSpace(k.Metadata))
	switch {
	case name == "":
		return nil, errors.New("APIKey has no Metadata: name the metadata key that holds the API key")
	case err != nil:
		return nil, err
	}
	source := name + " metadata"
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return key(ctx, source, md.Get(name))
	}, nil
}
