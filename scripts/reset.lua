-- redisrate reset.lua, script contract v2 (CONTRACT.md in the redisrate
-- repository): deletes KEYS[1] only when it holds the state of one of the
-- redisrate scripts, so that the next call finds every limit at full
-- capacity. A key that holds anything else gets an error and is left
-- untouched; a key that does not exist replies 0.
--
--   EVALSHA <sha1> 1 <key>   -> 1 deleted, 0 no such key
local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
if kind == 'none' then return 0 end
if kind == 'string' then
  local tag = string.match(redis.call('GET', key), '^(%S+) ')
  if tag == 'gcra:2' or tag == 'tb:2' or tag == 'lb:2' or tag == 'sw:2' or tag == 'fw:2' then return redis.call('DEL', key) end
elseif kind == 'zset' then
  if redis.call('ZSCORE', key, 'sliding_log:2') then return redis.call('DEL', key) end
end
return redis.error_reply('ERR key holds a value that is not redisrate state: left untouched')
