-- redisrate reset.lua, script contract v@VERSION@ (CONTRACT.md in the redisrate
-- repository): deletes KEYS[1] only when it holds the state of one of the
-- redisrate scripts, so that the next call finds every limit at full
-- capacity. A key that holds anything else gets an error and is left
-- untouched; a key that does not exist replies 0.
--
--   EVALSHA <sha1> 1 <key>   -> 1 deleted, 0 no such key
if #KEYS ~= 1 then return redis.error_reply("ERR invalid numkeys '" .. #KEYS .. "': must be 1 (the key to reset)") end
local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
if kind == 'none' then return 0 end
local find, byte, sub = string.find, string.byte, string.sub
-- field: a stored number, digits only, at most 16 of them (17 for a time
-- ahead of the clock), no leading zero, at most max
local function field(f, digits, max)
  return find(f, '^%d+$') and #f <= digits and (#f == 1 or byte(f) ~= 48) and f + 0 <= max
end
if kind == 'string' then
  local tag, body = string.match(redis.call('GET', key), '^(%S+)( [ %d%-]*%d)$')
  -- A key is state when some script reads it as its own: the same strict
  -- shape the scripts check (scripts/src/state.lua). Per script: numbers
  -- per limit; which of them is a recorded time (mod per, -1 for none) and
  -- its range; which is a level of up to 26 digits (-1 for none); which
  -- may be negative (-1 for none).
  local shape = ({ @SHAPES@ })[tag or '']
  if shape and not find(body, '  ') then
    local per, n, ok = shape[1], 0, true
    for f in string.gmatch(body, '%S+') do
      n = n + 1
      if n % per == shape[2] then
        ok = ok and field(f, 16, shape[3])
      elseif n % per == shape[4] then -- a level of up to 26 digits
        ok = ok and find(f, '^%d+$') and #f <= 26 and (#f == 1 or byte(f) ~= 48)
      elseif n % per == shape[5] and byte(f) == 45 then -- '-'
        ok = ok and f ~= '-0' and field(sub(f, 2), 16, 9007199254740991)
      else
        ok = ok and field(f, 16, 9007199254740991)
      end
    end
    if ok and n % per == 0 and n <= 8 * per then return redis.call('DEL', key) end
  end
elseif kind == 'zset' then
  -- scripts/src/sliding_log.lua: the marker holds minus the last sequence
  -- number, at most 2^53 - 1; every entry is a whole microsecond up to the
  -- latest time.
  local marker = redis.call('ZSCORE', key, '@MARKER@')
  if marker and find(marker, '^%-%d+$') and #marker <= 17 and -marker <= 9007199254740991 then
    local top = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if not top[2] or (top[2] + 0 <= @LOG_MAX@ and top[2] % 1 == 0) then return redis.call('DEL', key) end
  end
end
return redis.error_reply('ERR key holds a value that is not redisrate state: left untouched')
