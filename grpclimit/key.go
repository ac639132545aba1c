package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redisrate/redisrate/ratecore"
)

// KeyFunc returns the key that identifies the client of a call to the full
// method name method ("/package.Service/Method"), from its context (peer,
// incoming metadata). An error that wraps ratecore.ErrNoKey fails the call
// with codes.InvalidArgument, its text shown; any other with
// codes.Internal. An empty key is an error (it wraps ratecore.ErrNoKey):
// to exempt calls, use Config.Exempt.
type KeyFunc func(ctx context.Context, method string) (string, error)

// KeyFunc returns f itself, so that a KeyFunc is a Keyer; a nil f is an
// error.
func (f KeyFunc) KeyFunc() (KeyFunc, error) {
	if f == nil {
		return nil, errors.New("grpclimit: nil KeyFunc")
	}
	return f, nil
}

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
// balancer) every call comes from a proxy: name the metadata key they set
// (Header, such as "x-forwarded-for") and their own addresses
// (TrustedProxies), and the client is found as httplimit.ClientIP finds
// it: the metadata's addresses read from the right, trusted proxies
// skipped, the first other address taken, so that what a client writes
// itself is never reached. Its fields, and what they guard against
// (trusted ranges, IPv6 prefixes), are ratecore.IP's.
type PeerIP ratecore.IP

// KeyFunc checks p and returns its KeyFunc.
func (p PeerIP) KeyFunc() (KeyFunc, error) {
	ip := ratecore.IP(p)
	ip.Header = strings.ToLower(strings.TrimSpace(p.Header))
	name := ip.Header
	key, err := ip.KeyFunc()
	if err != nil {
		return nil, fmt.Errorf("PeerIP: %w", err)
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

// APIKey keys calls by an API key in the incoming metadata (Header, the
// metadata key, such as "x-api-key"), hashed with a secret: only
// HMAC-SHA256(Secret, API key) reaches Redis. A key the service never
// issued must not buy a limit of its own: give Verify, or put the
// interceptors after authentication and set Authenticated; New refuses an
// APIKey with neither. Its fields, and what they guard against, are
// ratecore.APIKey's.
type APIKey ratecore.APIKey

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	core := ratecore.APIKey(k)
	core.Header = strings.ToLower(strings.TrimSpace(k.Header))
	name := core.Header
	key, err := core.KeyFunc()
	if err != nil {
		return nil, err
	}
	source := name + " metadata"
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return key(ctx, source, md.Get(name))
	}, nil
}
