-- Algorithm: sliding log. Every admitted unit is one sorted-set entry scored
-- with its time; a request is admitted when the entries within the last
-- period_ms leave room for its cost. Exact over any span, but memory and time
-- grow with limit: for small limits that must be exact.
-- State: a sorted set with one member per admitted unit, named by a sequence
-- number and scored with its time in microseconds, plus the marker member
-- "redisrate:sliding_log", which tells this state from a user's sorted set and
-- holds the last sequence number as its score, negated (so it is never inside
-- a window, whose scores are times > 0).
local NAME = 'sliding_log'
local WHOLE = true -- limit, burst and cost must be whole numbers
local WINDOW = true -- burst may only be absent, 0 or equal to limit
--@include prelude.lua

-- One entry per unit: a cost that could be admitted must stay small enough
-- not to stall Redis while its entries are added.
local MAX_COST = 100000
if cost > MAX_COST then
  local fits = true
  for i = 1, n_limits do
    if cost > limits[i].limit then fits = false end
  end
  if fits then
    return redis.error_reply(invalid('cost', cost_s, 'at most 100000 for sliding_log, which keeps one entry per unit'))
  end
end

local MARKER = 'redisrate:sliding_log'
local ZADD_CHUNK = 500 -- members per ZADD: unpack() has a small stack
local marked = redis.pcall('ZSCORE', key, MARKER)
if type(marked) == 'table' and marked.err then
  return redis.error_reply('ERR key holds a value of another type, not sliding_log state: left untouched')
end
local fresh = not marked
if fresh and redis.call('EXISTS', key) == 1 then
  return redis.error_reply('ERR key holds a value that is not sliding_log state: left untouched')
end
local last_seq = fresh and 0 or -tonumber(marked)
local newest = nil
if not fresh then
  local top = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
  if top[2] then newest = tonumber(top[2]) end
end

-- ---- Algorithm ----
local verdicts = {}
local longest = 0
for i = 1, n_limits do
  local lim = limits[i]
  if lim.period_us > longest then longest = lim.period_us end
  -- the window is (now - period, now]; the marker's score is <= 0, never in it
  local lo = now - lim.period_us
  if lo < 0 then lo = 0 end
  local count = 0
  if newest and newest > lo then
    count = redis.call('ZCOUNT', key, '(' .. fmt('%d', lo), '+inf')
  end
  local ok, never, retry_us = false, false, 0
  if cost > lim.limit then
    never = true
  elseif count + cost <= lim.limit then
    ok = true
  else
    -- wait until the oldest (count + cost - limit) entries have left the window
    local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', count + cost - lim.limit - 1, 1)
    retry_us = tonumber(nth[2]) + lim.period_us - now
  end
  local after = ok and count + cost or count
  local rem = after < lim.limit and lim.limit - after or 0
  local reset_us = 0
  if ok and cost > 0 then
    reset_us = lim.period_us
  elseif count > 0 then
    reset_us = newest + lim.period_us - now
  end
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.limit,
    rem = rem, left = rem, reset_us = reset_us,
  }
end
--@include decide.lua

-- ---- The writes: trim what every window has left, add one entry per unit ----
if allowed and writes then
  if not fresh then
    redis.call('ZREMRANGEBYSCORE', key, '(0', fmt('%d', now - longest))
  end
  local batch = { -(last_seq + cost), MARKER }
  for n = 1, cost do
    batch[#batch + 1] = now
    batch[#batch + 1] = fmt('%d', last_seq + n)
    if #batch >= 2 * ZADD_CHUNK or n == cost then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
  redis.call('PEXPIRE', key, fmt('%d', us_to_ms(longest)))
end
return reply
