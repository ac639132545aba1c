-- ---- Arguments (scripts/src/args.lua): all of them validated before the key is read ----
if #KEYS ~= 1 then
  return redis.error_reply('ERR invalid numkeys \'' .. #KEYS .. "': must be 1 (the limiter's key)")
end
local key = KEYS[1]
local n = 1 -- limits in this call
local nargs = #ARGV
if nargs > 5 then
  n = 1 + ceil_div(nargs - 5, 3)
  if n > 8 then
    return redis.error_reply('ERR too many limits (' .. n .. '): must be at most 8')
  end
  if (nargs - 5) % 3 ~= 0 then
    return redis.error_reply('ERR incomplete limit #' .. n .. ': each further limit is the triple limit period_ms burst')
  end
end
local cost, check = 1, false
-- The first limit's arguments, and the others' in a table (limit, period_ms,
-- burst of each in turn), so that a call with one limit builds no table.
local limit1, period1, burst1
local lims = n > 1 and {} or nil
for i = 1, n do
  local at = i == 1 and 0 or 3 * i - 1
  local ls, ps, bs = ARGV[at + 1] or '', ARGV[at + 2] or '', ARGV[at + 3] or ''
  local limit = whole(ls, MAX_LIMIT)
  if not limit or limit < 1 then return invalid('limit', i, ls, LIMIT_RULE) end
  local period_ms = whole(ps, 1e12)
  if not period_ms or period_ms < 1 then
    return invalid('period_ms', i, ps, 'must be a whole number from 1 to 10^12')
  end
  local burst = limit
--@if window
  if bs ~= '' then
    local b = whole(bs, 1e15)
    if not b or (b ~= 0 and b ~= limit) then
      return invalid('burst', i, bs, 'must be empty, 0 or equal to limit for ' .. NAME)
    end
  end
--@else
  local given = false -- a burst of its own, named when the range is exceeded
  if bs ~= '' then
    local b = whole(bs, 1e15)
    if not b then
      return invalid('burst', i, bs, 'must be a whole number up to 10^15, or 0 or empty for limit')
    end
    if b > 0 then burst, given = b, true end
  end
--@end
--@if range
  if out_of_range(limit, period_ms, burst) then
--@if window
    return invalid('limit', i, ls, fmt('too large for exact arithmetic with period_ms %d', period_ms))
--@else
    if given then
      return invalid('burst', i, bs, fmt('too large for exact arithmetic with limit %d and period_ms %d', limit, period_ms))
    end
    return invalid('limit', i, ls, fmt('too large for exact arithmetic with period_ms %d', period_ms))
--@end
  end
--@end
  if i == 1 then
    local cs, mode = ARGV[4] or '', ARGV[5] or ''
    if cs ~= '' then
      cost = whole(cs, 1e15)
      if not cost then return invalid('cost', 1, cs, 'must be a whole number from 0 to 10^15') end
    end
    if mode ~= '' then
      if mode ~= 'check' then return invalid('mode', 1, mode, "must be empty or 'check'") end
      check = true
    end
  end
  if i == 1 then
    limit1, period1, burst1 = limit, period_ms, burst
  else
    lims[3 * i - 2], lims[3 * i - 1], lims[3 * i] = limit, period_ms, burst
  end
end

-- ---- The clock: Redis TIME, in whole microseconds (exact in a double) ----
local now
do
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
