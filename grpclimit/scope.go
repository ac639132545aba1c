package grpclimit

import (
	"context"
	"fmt"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratefields"
)

// Scope is a further key that a call is held to, with a limit of its own,
// in the same atomic call as the call's own limit (contract v2.1, several
// keys): per API key and per account, say. The call is admitted only if
// every limit admits it, and then recorded on every key; a call that one
// limit denies takes nothing from the others.
type Scope struct {
	// Name names the scope: its policy name in the metadata and metrics,
	// and part of its Redis keys. Printable ASCII without ':', '{' or '}',
	// other than Config.Name, the names of Config.Methods and the other
	// scopes'.
	Name string

	// Key gives the scope's key for a call, e.g. the account that owns the
	// call's API key. Its errors, and an empty key, are answered as
	// Config.Key's are.
	Key Keyer

	// Limit is the scope's limit, of the algorithm of the call's own
	// limit: one call runs one algorithm's script.
	Limit redisrate.Limit
}

// scope is a Scope ready to serve.
type scope struct {
	name string
	key  KeyFunc
}

// newScopes checks the scopes of c: their keys here, their names and
// limits with ratefields.NewScopes, whose answer adds them to each rule's
// limits (newRule, ratefields.Scopes.NewSet).
func newScopes(c Config, name string) ([]scope, ratefields.Scopes, error) {
	if len(c.Scopes) == 0 {
		s, err := ratefields.NewScopes("call", nil, nil, nil) // none, but the unit of errors
		return nil, s, err
	}
	taken := map[string]string{name: "Config.Name"}
	for m := range c.Methods {
		taken[m] = fmt.Sprintf("the method %q", m)
	}
	names, limits := make([]string, len(c.Scopes)), make([]redisrate.Limit, len(c.Scopes))
	for i, s := range c.Scopes {
		names[i], limits[i] = s.Name, s.Limit
	}
	scopeLimits, err := ratefields.NewScopes("call", names, limits, taken)
	if err != nil {
		return nil, ratefields.Scopes{}, fmt.Errorf("grpclimit: %w", err)
	}
	out := make([]scope, len(c.Scopes))
	for i, s := range c.Scopes {
		what := fmt.Sprintf("Config.Scopes[%d] (%q)", i, s.Name)
		if s.Key == nil {
			return nil, ratefields.Scopes{}, fmt.Errorf("grpclimit: %s has no Key", what)
		}
		key, err := keyFunc(s.Key, what+".Key")
		if err != nil {
			return nil, ratefields.Scopes{}, err
		}
		out[i] = scope{name: s.Name, key: key}
	}
	return out, scopeLimits, nil
}

// scopedKeys returns the Redis keys of a call and their limits: the call's
// own key first, then each scope's, in the order of r's limits, laid out by
// ratefields.ScopedKeys as httplimit lays out its own (the segment: Name,
// or the method of a method with limits of its own), so that an HTTP API
// and a gRPC one of the same Name and scopes share an account's state.
func (i *Interceptor) scopedKeys(ctx context.Context, method string, r *rule, key string) ([]redisrate.KeyLimit, error) {
	names, values := make([]string, len(i.scopes)), make([]string, len(i.scopes))
	for n, s := range i.scopes {
		v, err := keyOf(ctx, s.key, method)
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", s.name, err)
		}
		names[n], values[n] = s.name, v
	}
	keys, err := ratefields.ScopedKeys(i.name, r.segment, key, names, values)
	if err != nil {
		return nil, err // New checked the names: not reached
	}
	out := make([]redisrate.KeyLimit, len(keys))
	for n, k := range keys {
		out[n] = redisrate.KeyLimit{Key: k, Limit: r.fields.Limits[n]}
	}
	return out, nil
}
