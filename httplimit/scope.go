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

// newScopes checks the scopes of c: their keys here, their names and
// limits with ratefields.NewScopes, whose answer adds them to each plan's
// limits (newPlan, ratefields.Scopes.NewSet).
func newScopes(c Config, name string) ([]scope, ratefields.Scopes, error) {
	if len(c.Scopes) == 0 {
		s, err := ratefields.NewScopes("request", nil, nil, nil) // none, but the unit of errors
		return nil, s, err
	}
	taken := map[string]string{name: "Config.Name"}
	for _, p := range c.Plans {
		taken[p.Name] = fmt.Sprintf("the plan %q", p.Name)
	}
	names, limits := make([]string, len(c.Scopes)), make([]redisrate.Limit, len(c.Scopes))
	for i, s := range c.Scopes {
		names[i], limits[i] = s.Name, s.Limit
	}
	scopeLimits, err := ratefields.NewScopes("request", names, limits, taken)
	if err != nil {
		return nil, ratefields.Scopes{}, fmt.Errorf("httplimit: %w", err)
	}
	out := make([]scope, len(c.Scopes))
	for i, s := range c.Scopes {
		what := fmt.Sprintf("Config.Scopes[%d] (%q)", i, s.Name)
		if s.Key == nil {
			return nil, ratefields.Scopes{}, fmt.Errorf("httplimit: %s has no Key", what)
		}
		key, err := keyFunc(s.Key, what+".Key")
		if err != nil {
			return nil, ratefields.Scopes{}, err
		}
		out[i] = scope{name: s.Name, key: key}
	}
	return out, scopeLimits, nil
}

// scopedKeys returns the Redis keys of r and their limits: the request's
// own key first, then each scope's, in the order of p's limits, laid out by
// ratefields.ScopedKeys (the plan's name is the own key's segment), as
// grpclimit lays out its own.
func (m *Middleware) scopedKeys(r *http.Request, p *plan, key string) ([]redisrate.KeyLimit, error) {
	names, values := make([]string, len(m.scopes)), make([]string, len(m.scopes))
	for i, s := range m.scopes {
		v, err := keyOf(s.key, r)
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
