package httplimit

import (
	"fmt"
	"net/http"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratefields"
)

// Scope is a further key that a request is held to, with a limit of its
// own, in the same atomic call as the request's own limit (contract v2.1,
// several keys): per API key and per account, say. The request is admitted
// only if every limit admits it, and then recorded on every key; a request
// that one limit denies takes nothing from the others.
type Scope struct {
	// Name names the scope: its policy name in the headers and metrics,
	// and part of its Redis keys. Printable ASCII without ':', '{' or '}',
	// other than Config.Name, the plans' names and the other scopes'.
	Name string

	// Key gives the scope's key for a request, e.g. the account that owns
	// the request's API key, looked up on the server: for the broadest
	// scope never a value the client chooses (see Config.Scopes). Its
	// errors, and an empty key, are answered as Config.Key's are.
	Key Keyer

	// Limit is the scope's limit, of the algorithm of the request's own
	// limit: one call runs one algorithm's script.
	Limit redisrate.Limit
}

// scope is a Scope ready to serve.
type scope struct {
	name string
	key  KeyFunc
}

// maxKeys is the most keys one call takes (CONTRACT.md, several keys): the
// request's own and up to 7 scopes.
const maxKeys = 8

// newScopes checks the scopes of c; the plans check their limits against
// them (scopedPlan).
func newScopes(c Config, name string) ([]scope, error) {
	if len(c.Scopes) == 0 {
		return nil, nil
	}
	if len(c.Scopes) > maxKeys-1 {
		return nil, fmt.Errorf("httplimit: Config.Scopes has %d scopes: at most %d, for %d keys in one call with the request's own", len(c.Scopes), maxKeys-1, maxKeys)
	}
	taken := map[string]string{name: "Config.Name"}
	for _, p := range c.Plans {
		taken[p.Name] = fmt.Sprintf("the plan %q", p.Name)
	}
	out := make([]scope, len(c.Scopes))
	for i, s := range c.Scopes {
		what := fmt.Sprintf("Config.Scopes[%d]", i)
		if err := ratefields.CheckName(s.Name); err != nil {
			return nil, fmt.Errorf("httplimit: %s: invalid Name: %w", what, err)
		}
		if err := ratefields.CheckKeyName(s.Name); err != nil {
			return nil, fmt.Errorf("httplimit: invalid %s.Name %q: %w", what, s.Name, err)
		}
		if other, ok := taken[s.Name]; ok {
			// The name tells the scope's Redis keys apart from the
			// others' under one hash tag.
			return nil, fmt.Errorf("httplimit: %s has the Name %q of %s: give each scope a name of its own", what, s.Name, other)
		}
		taken[s.Name] = fmt.Sprintf("Config.Scopes[%d]", i)
		if s.Key == nil {
			return nil, fmt.Errorf("httplimit: %s (%q) has no Key", what, s.Name)
		}
		key, err := s.Key.KeyFunc()
		if err != nil {
			return nil, fmt.Errorf("httplimit: %s (%q).Key: %w", what, s.Name, err)
		}
		if key == nil {
			return nil, fmt.Errorf("httplimit: %s (%q).Key gives a nil KeyFunc", what, s.Name)
		}
		if err := s.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("httplimit: %s (%q): invalid Limit: %w", what, s.Name, err)
		}
		if s.Limit.Capacity() < 1 {
			return nil, fmt.Errorf("httplimit: %s (%q): Limit %v has a capacity below 1: it could never admit a request", what, s.Name, s.Limit)
		}
		out[i] = scope{name: s.Name, key: key}
	}
	return out, nil
}

// scopedPlan adds the scopes' limits to a plan's own, which must be one
// limit: a key holds one limit in a call of several keys.
func scopedPlan(p Plan, scopes []Scope) (Plan, error) {
	if len(scopes) == 0 {
		return p, nil
	}
	if len(p.Limits) != 1 {
		return p, fmt.Errorf("%d limits with Config.Scopes: with scopes, each key holds one limit (a call of several keys, CONTRACT.md); hold the request's key to a further limit with a Scope of the same Key", len(p.Limits))
	}
	names := p.PolicyNames
	if len(names) == 0 {
		names = []string{p.Name}
	}
	if len(names) != 1 {
		return p, fmt.Errorf("PolicyNames has %d names for 1 limit", len(names))
	}
	own := p.Limits[0]
	p.Limits = []redisrate.Limit{own}
	p.PolicyNames = append([]string(nil), names...)
	for i, s := range scopes {
		if s.Limit.Algorithm != own.Algorithm {
			return p, fmt.Errorf("Config.Scopes[%d] (%q) has a %s limit, and the request's own is %s: the limits of one call run one algorithm's script; give every limit the same algorithm", i, s.Name, s.Limit.Algorithm, own.Algorithm)
		}
		p.Limits = append(p.Limits, s.Limit)
		p.PolicyNames = append(p.PolicyNames, s.Name)
	}
	return p, nil
}

// scopedKeys returns the Redis keys of r and their limits: the request's
// own key first, then each scope's, in the order of p's limits, laid out by
// ratefields.ScopedKeys (the plan's name is the own key's segment), as
// grpclimit lays out its own.
func (m *Middleware) scopedKeys(r *http.Request, p *plan, key string) ([]redisrate.KeyLimit, error) {
	names, values := make([]string, len(m.scopes)), make([]string, len(m.scopes))
	for i, s := range m.scopes {
		v, err := s.key(r)
		if err == nil && v == "" {
			err = fmt.Errorf("%w: the request's key is empty (use Config.Exempt to exempt requests)", ErrNoKey)
		}
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", s.name, err)
		}
		names[i], values[i] = s.name, v
	}
	keys, err := ratefields.ScopedKeys(m.name, p.name, key, names, values)
	if err != nil {
		return nil, err // New checked the names: not reached
	}
	out := make([]redisrate.KeyLimit, len(keys))
	for i, k := range keys {
		out[i] = redisrate.KeyLimit{Key: k, Limit: p.fields.Limits[i]}
	}
	return out, nil
}
