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

// maxKeys is the most keys one call takes (CONTRACT.md, several keys): the
// call's own and up to 7 scopes.
const maxKeys = 8

// newScopes checks the scopes of c; newRule checks each rule's limits
// against them.
func newScopes(c Config, name string) ([]scope, error) {
	if len(c.Scopes) == 0 {
		return nil, nil
	}
	if len(c.Scopes) > maxKeys-1 {
		return nil, fmt.Errorf("grpclimit: Config.Scopes has %d scopes: at most %d, for %d keys in one call with the call's own", len(c.Scopes), maxKeys-1, maxKeys)
	}
	taken := map[string]string{name: "Config.Name"}
	for m := range c.Methods {
		taken[m] = fmt.Sprintf("the method %q", m)
	}
	out := make([]scope, len(c.Scopes))
	for i, s := range c.Scopes {
		what := fmt.Sprintf("Config.Scopes[%d]", i)
		if err := ratefields.CheckName(s.Name); err != nil {
			return nil, fmt.Errorf("grpclimit: %s: invalid Name: %w", what, err)
		}
		if err := ratefields.CheckKeyName(s.Name); err != nil {
			return nil, fmt.Errorf("grpclimit: invalid %s.Name %q: %w", what, s.Name, err)
		}
		if other, ok := taken[s.Name]; ok {
			// The name tells the scope's Redis keys apart from the
			// others' under one hash tag.
			return nil, fmt.Errorf("grpclimit: %s has the Name %q of %s: give each scope a name of its own", what, s.Name, other)
		}
		taken[s.Name] = what
		if s.Key == nil {
			return nil, fmt.Errorf("grpclimit: %s (%q) has no Key", what, s.Name)
		}
		key, err := s.Key.KeyFunc()
		if err != nil {
			return nil, fmt.Errorf("grpclimit: %s (%q).Key: %w", what, s.Name, err)
		}
		if key == nil {
			return nil, fmt.Errorf("grpclimit: %s (%q).Key gives a nil KeyFunc", what, s.Name)
		}
		if err := s.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: %s (%q): invalid Limit: %w", what, s.Name, err)
		}
		if s.Limit.Capacity() < 1 {
			return nil, fmt.Errorf("grpclimit: %s (%q): Limit %v has a capacity below 1: it could never admit a call", what, s.Name, s.Limit)
		}
		out[i] = scope{name: s.Name, key: key}
	}
	return out, nil
}

// withScopes adds the scopes' limits and names to a rule's own, which must
// be one limit: a key holds one limit in a call of several keys.
func withScopes(limits []redisrate.Limit, names []string, defaultName string, scopes []Scope) ([]redisrate.Limit, []string, error) {
	if len(scopes) == 0 {
		return limits, names, nil
	}
	if len(limits) != 1 {
		return nil, nil, fmt.Errorf("%d limits with Config.Scopes: with scopes, each key holds one limit (a call of several keys, CONTRACT.md); hold the call's key to a further limit with a Scope of the same Key", len(limits))
	}
	if len(names) == 0 {
		names = []string{defaultName}
	}
	if len(names) != 1 {
		return nil, nil, fmt.Errorf("PolicyNames has %d names for 1 limit", len(names))
	}
	own := limits[0]
	limits = []redisrate.Limit{own}
	names = []string{names[0]}
	for i, s := range scopes {
		if s.Limit.Algorithm != own.Algorithm {
			return nil, nil, fmt.Errorf("Config.Scopes[%d] (%q) has a %s limit, and the call's own is %s: the limits of one call run one algorithm's script; give every limit the same algorithm", i, s.Name, s.Limit.Algorithm, own.Algorithm)
		}
		limits = append(limits, s.Limit)
		names = append(names, s.Name)
	}
	return limits, names, nil
}

// scopedKeys returns the Redis keys of a call and their limits: the call's
// own key first, then each scope's, in the order of r's limits, laid out by
// ratefields.ScopedKeys as httplimit lays out its own (the segment: Name,
// or the method of a method with limits of its own), so that an HTTP API
// and a gRPC one of the same Name and scopes share an account's state.
func (i *Interceptor) scopedKeys(ctx context.Context, method string, r *rule, key string) ([]redisrate.KeyLimit, error) {
	names, values := make([]string, len(i.scopes)), make([]string, len(i.scopes))
	for n, s := range i.scopes {
		v, err := s.key(ctx, method)
		if err == nil && v == "" {
			err = fmt.Errorf("%w: the call's key is empty (use Config.Exempt to exempt calls)", ErrNoKey)
		}
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
