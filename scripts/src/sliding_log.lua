-- Algorithm: sliding log. Every admitted unit is one sorted-set entry scored
-- with its time; a request is admitted when the entries within the last
-- period_ms leave room for its cost. Exact over any span, but memory and time
-- grow with limit: for small limits that must be exact.
-- State: a sorted set with one member per admitted unit, named by a sequence
-- number and scored with its time in microseconds, plus the marker member
-- "redisrate:sliding_log", which tells this state from a user's sorted set and
-- holds the last sequence number as its score, negated (so it is never inside
-- a window, whose scores are times > 0).
--@include prelude.lua

local SPEC = { name = 'sliding_log', per_limit = 1, whole = true, window = true }
local MARKER = 'redisrate:sliding_log'
local ZADD_CHUNK = 500 -- members per ZADD: unpack() has a small stack

local args, err = parse_args(SPEC)
if not args then return redis.error_reply(err) end
local key = KEYS[1]
local marked = redis.pcall('ZSCORE', key, MARKER)
if type(marked) == 'table' and marked.err then
  return redis.error_reply('ERR key holds a value of another type, not sliding_log state: left untouched')
end
local fresh = not marked
local last_seq = fresh and 0 or -tonumber(marked)
if fresh and redis.call('EXISTS', key) == 1 then
  return redis.error_reply('ERR key holds a value that is not sliding_log state: left untouched')
end
local now = clock_us()

local cost = args.cost
local newest = nil
if not fresh then
  local top = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
  if top[2] then newest = tonumber(top[2]) end
end

local verdicts = {}
local longest = 0
for i, lim in ipairs(args.limits) do
  if lim.period_us > longest then longest = lim.period_us end
  -- the window is (now - period, now]; the marker's score is <= 0, never in it
  local lo = now - lim.period_us
  if lo < 0 then lo = 0 end
  local count = 0
  if newest and newest > lo then
    count = redis.call('ZCOUNT', key, '(' .. num_str(lo), '+inf')
  end
  local v = { capacity = lim.limit, ok = false, never = false, retry_us = 0 }
  if cost > lim.limit then
    v.never = true
  elseif count + cost <= lim.limit then
    v.ok = true
  else
    -- wait until the oldest (count + cost - limit) entries have left the window
    local nth = redis.call('ZRANGEBYSCORE', key, '(' .. num_str(lo), '+inf', 'WITHSCORES', 'LIMIT', count + cost - lim.limit - 1, 1)
    v.retry_us = tonumber(nth[2]) + lim.period_us - now
  end
  local after = v.ok and count + cost or count
  v.rem = after < lim.limit and lim.limit - after or 0
  v.left = v.rem
  if v.ok and cost > 0 then
    v.reset_us = lim.period_us
  elseif count > 0 then
    v.reset_us = newest + lim.period_us - now
  else
    v.reset_us = 0
  end
  verdicts[i] = v
end

local allowed, reply = decide(verdicts)
if allowed and cost > 0 and not args.check then
  if not fresh then
    redis.call('ZREMRANGEBYSCORE', key, '(0', num_str(now - longest))
  end
  local batch = { -(last_seq + cost), MARKER }
  for n = 1, cost do
    batch[#batch + 1] = now
    batch[#batch + 1] = num_str(last_seq + n)
    if #batch >= 2 * ZADD_CHUNK or n == cost then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
  redis.call('PEXPIRE', key, us_to_ms(longest))
end
return reply
