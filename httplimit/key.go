package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/redisrate/redisrate/ratecore"
)

// KeyFunc returns the key that identifies the client of r, such as its IP
// address or its API key; the middleware keeps one rate-limit state per key.
//
// An error that wraps ratecore.ErrNoKey means that the request does not
// identify its client (a missing API key): it is the client's fault, and
// the middleware answers 400 Bad Request, showing the error's text to the
// client. Any other error is the server's fault: 500, its text not shown
// (see Config.OnError). An empty key is an error too (it wraps
// ratecore.ErrNoKey): a missing identity must never mean "no limit". To
// exempt requests, use Config.Exempt.
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

// APIKey keys requests by an API key that the client sends in a header
// (Header, such as "X-API-Key"), hashed with a secret: only
// HMAC-SHA256(Secret, API key) reaches Redis. A key the service never
// issued must not buy a limit of its own: give Verify, or put the
// middleware after authentication and set Authenticated; New refuses an
// APIKey with neither. Its fields, and what they guard against, are
// ratecore.APIKey's.
type APIKey ratecore.APIKey

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	canonical := http.CanonicalHeaderKey(strings.TrimSpace(k.Header))
	core := ratecore.APIKey(k)
	core.Header = canonical
	key, err := core.KeyFunc()
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
// cannot forge. Behind reverse proxies or load balancers, name the header
// they set (Header, such as "X-Forwarded-For") and their own addresses
// (TrustedProxies): the header is believed only as far as trusted hops
// vouch for it, so what a client writes into it cannot spoof another
// address. Its fields, and what they guard against (trusted ranges, IPv6
// prefixes), are ratecore.IP's.
type ClientIP ratecore.IP

// KeyFunc checks c and returns its KeyFunc. Keys look like "ip:192.0.2.1"
// or "ip:2001:db8:1:2::/64".
func (c ClientIP) KeyFunc() (KeyFunc, error) {
	ip := ratecore.IP(c) // ratecore walks the hops and groups the addresses
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
