package redisrate

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
)

// resetSource deletes KEYS[1] only when it holds the state of one of the
// scripts (a string with one of their tags, or a sorted set with the sliding
// log's marker), so that Reset can never delete a user's data. The tags are
// those of scripts/src/state.lua; TestResetKnowsEveryState fails when a
// script's state is not recognised here.
const resetSource = `local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
if kind == 'none' then return 0 end
if kind == 'string' then
  local tag = string.match(redis.call('GET', key), '^(%l+) ')
  if tag == 'gcra' or tag == 'tb' or tag == 'lb' or tag == 'sw' or tag == 'fw' then
    return redis.call('DEL', key)
  end
elseif kind == 'zset' then
  if redis.call('ZSCORE', key, 'redisrate:sliding_log') then return redis.call('DEL', key) end
end
return redis.error_reply('ERR key holds a value that is not redisrate state: left untouched')
`

var resetScript = func() Script {
	sum := sha1.Sum([]byte(resetSource))
	return Script{Algorithm: -1, Name: "reset", Source: resetSource, SHA1: hex.EncodeToString(sum[:])}
}()

// Reset deletes the state kept under key, so that its next request finds
// every limit at full capacity. A key that holds anything but redisrate state
// is left untouched, and the error matches ErrForeignKey. Resetting a key
// that does not exist is not an error.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l == nil || l.rdb == nil {
		return ErrNoClient
	}
	key = l.prefix + key
	if d, ok := l.rdb.(*denyCacheClient); ok {
		d.cache.forget(key)
	}
	if _, err := run(ctx, l.rdb, &resetScript, false, []string{key}, nil); err != nil {
		return &Error{Script: resetScript.Name, Key: key, Err: err, kind: classify(err)}
	}
	return nil
}
