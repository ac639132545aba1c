-- ---- Arguments (scripts/src/args.lua): all of them validated before a key is read ----
local keys, argv = KEYS, ARGV -- a global costs Redis more to read than a local
-- One key holds every limit; with k keys (2 to 8), limit i guards KEYS[i].
-- The key count and the keys come before ARGV and are checked first; that
-- k is the number of limits, last (guarantee 8: a miscount after values).
local k, nargs = #keys, #argv
-- Limits in this call: the first, and one for each further triple begun.
local n = nargs > 5 and 1 + (nargs - 5 + -(nargs - 5) % 3) / 3 or 1
-- A miscount named once every value is read: true for a last triple cut
-- short (it comes first), 'numkeys' for k keys other than n limits.
local short = false
if k ~= 1 then
  if k < 1 or k > 8 then
    return redis.error_reply("ERR invalid numkeys '" .. k .. "': must be 1 (every limit on one key) or 2 to 8 (limit i on KEYS[i])")
  end
  for i = 2, k do
    for j = 1, i - 1 do
      if keys[i] == keys[j] then return invalid('key', i, keys[i], 'must differ from key #' .. j) end
    end
  end
  if k ~= n then short = 'numkeys' end
end
local key = keys[1]
local cost, mode = 1, '' -- mode: '', 'check', 'upto', 'refund' or 'force'
-- The first limit's arguments go into locals; a further limit's, once read,
-- replace their strings in argv (limit i at 3i, 3i + 1, 3i + 2), so that no
-- call builds a table for them.
local at, limit1, period1, burst1 = 0 -- at: limit i's arguments follow argv[at] (0 for the first, 3i - 1 for a further one)
-- Arguments are checked in ARGV order (guarantee 8), so a bad value is named
-- before a miscount that follows it: too many limits, a last triple cut
-- short, a key count other than the number of limits.
for i = 1, n < 8 and n or 8 do -- a 9th limit is too many, once the first 8 are read
  local ls, ps, bs = argv[at + 1], argv[at + 2], argv[at + 3]
  if i == 1 then ls, ps, bs = ls or '', ps or '', bs or '' end -- the first limit's burst is optional (a further limit's limit is there: n counts the triples begun)
  -- Each number is read as helpers.lua's "Numbers" says: nil for anything
  -- but digits.
  local limit = @read(ls)@
  if not limit or limit < 1 or limit > MAX_LIMIT then return invalid('limit', i, ls, LIMIT_RULE) end
  if not ps then short = true break end
  local period_ms = @readperiod(ps)@ -- (a script compares it with a second, a minute, an hour and a day first)
  if not period_ms or period_ms < 1 or period_ms > 1e12 then
    return invalid('period_ms', i, ps, 'must be a whole number from 1 to 10^12')
  end
  if not bs then short = true break end
  local burst = limit
--@if window
  if bs ~= '' then
    local b = @read(bs)@
    if not b or (b ~= 0 and b ~= limit) then
      return invalid('burst', i, bs, 'must be empty, 0 or equal to limit for ' .. NAME)
    end
  end
--@else
  local given = false -- a burst of its own, named when the range is exceeded
  if bs ~= '' then
    local b = @read(bs)@
    if not b or b > MAX_LIMIT then
      return invalid('burst', i, bs, BURST_RULE)
    end
    if b > 0 then burst, given = b, true end
  end
--@end
--@if range
  -- The accepted range (out_of_range): first a check that the common calls
  -- pass at once, max(limit, burst) * period_ms <= 4 * 10^12.
  if (burst > limit and burst or limit) * period_ms > 4e12 then
    local fault = out_of_range(limit, period_ms, burst)
    if fault == 'period_ms' then
--@if window
      return invalid('period_ms', i, ps, fmt('must be at most 31622400000 (366 days) with limit %d', limit))
--@else
      return invalid('period_ms', i, ps, fmt('must be at most 31622400000 (366 days) with limit %d' .. (given and ' and burst %d' or ''), limit, burst))
--@end
    elseif fault then
      return invalid('burst', i, bs, fmt('must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit %d and period_ms %d', limit, period_ms))
    end
  end
--@end
  if i == 1 then
    if nargs > 3 then -- cost and mode (absent arguments cost a lookup each)
      local cs = argv[4]
      mode = argv[5] or ''
      if cs ~= '' then
        cost = @read(cs)@
        if not cost or cost > 1e15 then return invalid('cost', 1, cs, 'must be a whole number from 0 to 10^15') end
--@if log
        -- bounded work (guarantee 11): the entries a call adds on all its keys
        if cost * k > 10000 then
          if k == 1 then return invalid('cost', 1, cs, 'must be at most 10000 for sliding_log') end
          return invalid('cost', 1, cs, fmt('with %d keys must be at most %d', k, (10000 - 10000 % k) / k))
        end
--@end
      end
      if mode ~= '' and mode ~= 'check' and mode ~= 'upto' and mode ~= 'refund' and mode ~= 'force' then
        if type(mode) == 'table' then return redis.error_reply(mode[1]) end -- a _ro function's writing mode (library.lua's as_check)
        return invalid('mode', 1, mode, "must be empty, 'check', 'upto', 'refund' or 'force'")
      end
    end
    limit1, period1, burst1, at = limit, period_ms, burst, 5
  else
    argv[at + 1], argv[at + 2], argv[at + 3] = limit, period_ms, burst
    at = at + 3 -- (apart: gopher-lua may assign at before it indexes argv)
  end
end
if n > 8 then return redis.error_reply('ERR too many limits (' .. n .. '): must be at most 8') end
if short then
  if short == 'numkeys' then
    return redis.error_reply("ERR invalid numkeys '" .. k .. "': must be 1 or the number of limits (" .. n .. '), one limit per key')
  end
  return redis.error_reply('ERR incomplete limit #' .. n .. ': each further limit is the triple limit period_ms burst')
end

-- ---- The clock: Redis TIME, in whole microseconds (exact in a double) ----
local now
do
  local t = redis.call('TIME')
  local secs = t[1] -- the library reads it from NUM: the seconds change once a second
  now = @clock(secs)@ * 1000000 + t[2]
end
