-- redisrate sliding_log.lua: sliding log: one sorted-set entry per admitted unit; exact over any span, for small limits.
-- Script contract v4 (CONTRACT.md in the redisrate repository). This file
-- stands alone: copy it, SCRIPT LOAD it, EVALSHA it from any Redis client.
--
-- Call:
--   EVALSHA <sha1> 1 <key> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--   EVALSHA <sha1> <k> <key1> ... <keyk> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--
-- KEYS: one key holds every limit's state. With k keys (2 to 8, all
-- different, in one cluster slot by a hash tag), limit i guards KEYS[i],
-- which keeps its limit's state as a one-key call with it would: a key many
-- calls share (an organisation's) can also be called alone with its limit.
--
-- ARGV (whole decimal numbers, digits only; "" means the default):
--   1 limit      units per period_ms, from 1 to 10000
--   2 period_ms  the period in milliseconds, from 1 to 10^12
--   3 burst      absent, 0 or equal to limit (a window has no burst of its own)
--   4 cost       units this request takes, default 1; 0 reads the state and takes nothing
--   5 mode       "" decides and records, all or nothing; "check" decides exactly so but
--                records nothing; "upto" takes as many units as every limit admits, at
--                most cost; "refund" gives cost units back; "force" records cost units
--                whatever the limits decide, as far as a debt of one capacity
--   6..          further "limit period_ms burst" triples, up to 8 limits in all:
--                admitted only if every limit admits, then recorded against each
--                (on every key); otherwise nothing is written (on any key)
--
-- Reply: seven integers (a client ignores any it does not know)
--   1 allowed         1 admitted, 0 denied
--   2 remaining       whole units left after this call (on a denial: now)
--   3 retry_after_ms  0 when allowed; else ms until the same request would be admitted; -1 never
--   4 reset_after_ms  ms until the key is back to full capacity
--   5 capacity        the binding limit's capacity (limit)
--   6 binding         which limit (1, 2, ...) fields 2 to 5 describe; with k keys, KEYS[binding]'s
--   7 units           units this call recorded on the binding limit (given back, for refund)
-- For upto, a grant of 0 is a denial whose retry_after_ms is the wait for one
-- unit. refund and force describe the key after the call: retry_after_ms is
-- the wait until one unit would be admitted; force is allowed (1) when the
-- empty mode would have admitted it.
--
-- Errors: "ERR invalid <argument> '<value>': <rule>", naming the first fault in
-- this order: numkeys not 1 to 8, a key the same as an earlier one ("key #i"),
-- ARGV in its order (a 9th limit is too many), a last triple cut short, then
-- k keys for other than k limits. A key that holds anything but this
-- script's state is refused and left untouched ("ERR key holds ...", with
-- several keys "ERR key #i holds ..."). Under maxmemory with noeviction, a
-- writing call fails with OOM and writes nothing. The clock is Redis TIME;
-- a clock that steps back decides as of the time the state records.
--
-- Algorithm: sliding log. Every admitted unit is one sorted-set entry scored
-- with its time; a request is admitted when the entries within the last
-- period_ms leave room for its cost. Exact over any span, but memory and time
-- grow with limit, which is capped at 10000: for small limits that must be exact.
-- State (v4): a sorted set with one member per admitted unit, named by a
-- sequence number and scored with its time in microseconds, plus the
-- marker member "sliding_log:3" whose score is minus 2 * seq + sign, seq
-- the last sequence number (so it is never inside a window, whose scores
-- are times > 0): entries are named 1, 2, ... while sign is 0, and -1, -2,
-- ... while it is 1; past 2^52 - 1 the sequence starts again from 1 with
-- the other sign, and no entry held is renamed. A sorted set without the
-- marker is not state.
-- Under other limits the entries are whole units, counted in the new
-- window: raised limits never deny what the old admit, lowered never admit
-- what they deny (guarantee 12).
-- Modes: upto takes what every limit grants; refund removes the newest
-- entries; force adds entries as far as twice each limit within its period.
-- Bounded work (guarantee 11): with k keys, cost * k is at most 10000 in
-- every mode, so no call adds more than 10000 entries, and
-- each key trims at most 10000 / k expired entries a call (the rest later;
-- counts and waits read only the window, so the decision stays exact).
-- Never more admitted than limit in any span of period_ms.

-- ---- String functions (scripts/src/strings.lua) ----
-- The string functions of every call are fetched here, the rare ones where
-- they are used, through a string's metatable: a Functions library may not
-- read the globals (string, math) while it loads.
local find, match, fmt = ('').find, ('').match, ('').format

-- ---- sliding_log's constants (from its manifest) ----
local NAME, TAG = 'sliding_log', 'sliding_log:3'
local MAX_LIMIT, LIMIT_RULE, BURST_RULE = 10000, 'must be a whole number from 1 to 10000', 'must be a whole number up to 10000, or 0 or empty for limit'
local TIME_MAX = 8835955200000000 -- the latest entry: the year 2250, in microseconds

-- ---- Helpers (scripts/src/helpers.lua) ----
-- Defined once: at the top of each script, and once at FUNCTION LOAD in the
-- library. Everything below runs the same on Redis's Lua 5.1 and on
-- gopher-lua (miniredis): numbers are read with `s + 0` only after a pattern
-- has proved them digits, and every integer stays below 2^53, where `%` and
-- `/` on doubles are exact.
-- A call's cost in Redis is counted in instructions (bench/callgrind.sh): a
-- Lua operation is some 30, a string function some 1,000, and every string,
-- table or closure made some 500. So the common call makes few of them.
-- Numbers: an argument in the common form (no leading zero, at most 15
-- digits) is read at once, with one find and s + 0; whole reads the others:
-- digits only, leading zeros dropped before reading (gopher-lua would read
-- 010 as octal), at most 16 digits left; nil otherwise. Past its last 16
-- characters, which hold every digit that counts, a long argument must be
-- zeros: compared whole with as many zeros (copies in C; a Lua pattern
-- over 1 MB of them took 15 to 40 ms, string.rep 20 to 60).
local function whole(s)
  local n = #s
  if n > 16 then
    if ('').byte(s) ~= 48 then return nil end -- more than 16 characters, the first not a zero
    local z, m = '0', n - 16
    while #z < m do z = z .. z end -- (doubled: rep adds one character at a time)
    if ('').sub(s, 1, m) ~= ('').sub(z, 1, m) then return nil end
    s = ('').sub(s, n - 15)
  end
  s = match(s, '^0*(%d+)$')
  if s then return s + 0 end
  return nil
end

-- ceil(n / d), for integers n of any sign and d > 0 with |n| + d < 2^53, is
-- written (n + -n % d) / d where it is needed: % floors, so n + -n % d is
-- the next multiple of d, and the division is exact. (A function would cost
-- a call, and in a script a closure made on every call.)

-- less reports whether a/b < c/d exactly, for whole a, c >= 0 and b, d >= 1
-- below 2^53, where a*d and c*b might not be exact: by whole parts, then
-- by the reciprocals of what is left (a continued fraction).
local function less(a, b, c, d)
  local x, y = a * d, c * b
  if x < 9007199254740992 and y < 9007199254740992 then return x < y end -- both exact
  local flip = false
  while true do
    local p, q = (a - a % b) / b, (c - c % d) / d
    if p ~= q then return (p < q) ~= flip end
    a = a % b
    c = c % d
    if a == 0 and c == 0 then return false end -- equal
    if a == 0 or c == 0 then return (a == 0) ~= flip end
    local b0 = b
    b = a
    a = b0
    local d0 = d
    d = c
    c = d0
    flip = not flip
  end
end

-- invalid is the contract's argument error: the argument, as given, and its rule.
local function invalid(name, i, s, rule)
  if #s > 40 then s = ('').sub(s, 1, 40) .. '...' end
  if i > 1 then name = name .. ' #' .. i end
  return redis.error_reply('ERR invalid ' .. name .. " '" .. s .. "': " .. rule)
end

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
  local limit = #ls < 16 and find(ls, '^[1-9]%d*$') and ls + 0 or whole(ls)
  if not limit or limit < 1 or limit > MAX_LIMIT then return invalid('limit', i, ls, LIMIT_RULE) end
  if not ps then short = true break end
  local period_ms = ps == '1000' and 1000 or ps == '60000' and 60000 or ps == '3600000' and 3600000 or ps == '86400000' and 86400000 or #ps < 16 and find(ps, '^[1-9]%d*$') and ps + 0 or whole(ps) -- (a script compares it with a second, a minute, an hour and a day first)
  if not period_ms or period_ms < 1 or period_ms > 1e12 then
    return invalid('period_ms', i, ps, 'must be a whole number from 1 to 10^12')
  end
  if not bs then short = true break end
  local burst = limit
  if bs ~= '' then
    local b = #bs < 16 and find(bs, '^[1-9]%d*$') and bs + 0 or whole(bs)
    if not b or (b ~= 0 and b ~= limit) then
      return invalid('burst', i, bs, 'must be empty, 0 or equal to limit for ' .. NAME)
    end
  end
  if i == 1 then
    if nargs > 3 then -- cost and mode (absent arguments cost a lookup each)
      local cs = argv[4]
      mode = argv[5] or ''
      if cs ~= '' then
        cost = #cs < 16 and find(cs, '^[1-9]%d*$') and cs + 0 or whole(cs)
        if not cost or cost > 1e15 then return invalid('cost', 1, cs, 'must be a whole number from 0 to 10^15') end
        -- bounded work (guarantee 11): the entries a call adds on all its keys
        if cost * k > 10000 then
          if k == 1 then return invalid('cost', 1, cs, 'must be at most 10000 for sliding_log') end
          return invalid('cost', 1, cs, fmt('with %d keys must be at most %d', k, (10000 - 10000 % k) / k))
        end
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
  now = secs * 1000000 + t[2]
end

-- ---- State: each key's marker, and its newest entry ----
-- With one key, it holds every limit's entries; with several, key i holds
-- limit i's, read as a one-key call with one limit reads it, and an error
-- names its position (key #i). The locals hold KEYS[1]'s numbers; with
-- several keys, logs holds key i's last sequence number, newest entry and
-- time at 3i - 2, 3i - 1 and 3i.
local last_seq, newest, at, logs, i = 0 -- i: with several keys, the key read
while true do -- KEYS[1], then with several keys each in turn
  local marked = redis.pcall('ZSCORE', key, TAG)
  if type(marked) == 'table' then
    return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value of another type, not sliding_log state: left untouched')
  end
  if marked then
    -- The sequence is at most 2^53 - 1, so every entry's number is exact.
    if not find(marked, '^%-%d+$') or #marked > 17 or -marked > 9007199254740991 then
      return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
    end
    last_seq = -marked
    local top = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if top[2] then
      newest = top[2] + 0
      if newest > TIME_MAX or newest % 1 ~= 0 then -- an entry is a whole microsecond before 2250
        return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
      end
    end
  elseif redis.call('EXISTS', key) == 1 then
    return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
  end
  -- A clock behind the newest entry (it stepped back) decides as of that entry.
  at = now
  if newest and newest > now then at = newest end
  if k == 1 then break end
  -- Several keys: key i's numbers to logs, KEYS[1]'s back in the locals
  -- once every key is read.
  if not logs then logs, i = {}, 1 end
  logs[3 * i - 2], logs[3 * i - 1], logs[3 * i] = last_seq, newest, at
  if i == k then
    key, last_seq, newest, at = keys[1], logs[1], logs[2], logs[3]
    break
  end
  last_seq, newest, i = 0, nil, i + 1
  key = keys[i]
end
-- force with one key and several limits: the log they share takes the
-- fewest units any of them has room for (twice its limit in its period).
local grant
if mode == 'force' and k == 1 and n > 1 then
  grant = cost
  for i = 1, n do
    local limit, period_us = limit1, period1 * 1000
    if i > 1 then limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000 end
    local lo = at - period_us
    if lo < 0 then lo = 0 end
    local count = 0
    if newest and newest > lo then count = redis.call('ZCOUNT', key, '(' .. fmt('%d', lo), '+inf') end
    if 2 * limit - count < grant then grant = 2 * limit - count end
  end
  if grant < 0 then grant = 0 end
end
local longest, give -- the longest period: what the log must keep; refund: the entries to remove (one key)
local backs = k > 1 and {} or nil -- with several keys, what refund or force does to key i
-- ---- Decision: every limit in turn (scripts/src/loop.lua) ----
-- The empty mode, check and upto are all or nothing; refund and force
-- (settle) act on every limit whatever it decides. upto takes two passes:
-- the first, at cost 0, measures the whole units every limit has left; the
-- second takes the least of them as a call of that cost would (upto.lua).
local settle = mode == 'refund' or mode == 'force'
local want, least = cost -- upto: the units asked for; the fewest whole units a limit has left
if mode == 'upto' then cost = 0 end
local writes, allowed, ttl_us, out, changed, short, touched -- changed: settle altered a limit; short: force past what the empty mode admits; touched: this limit is written
local a_i, a_frac, a_per, a_rem, a_reset, a_cap, a_units, a_retry -- the binding limit if admitted (or settled)
local d_i, d_retry, d_rem, d_reset, d_cap -- the binding limit if denied
local records -- with several keys: key i's state and TTL, at 2i - 1 and 2i (keyed.lua), but the last's
repeat
  writes = cost > 0 and mode ~= 'check' -- only an admitted request with a cost, not a check, records
  allowed, ttl_us, out, changed, short, least, a_i, d_i, records, touched = true, 0, TAG, not settle, false, nil, nil, nil, nil, true
longest, give = 0, 0
for i = 1, n do
  local limit, period_us = limit1, period1 * 1000
  if k > 1 and i == 1 then key, last_seq, newest, at = keys[1], logs[1], logs[2], logs[3] end -- (upto's second pass starts again from KEYS[1])
  if i > 1 then
    limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000
    if k > 1 then -- several keys: KEYS[i]'s log, kept for its limit's period
      key, last_seq, newest, at, longest = keys[i], logs[3 * i - 2], logs[3 * i - 1], logs[3 * i], 0
    end
  end
  if period_us > longest then longest = period_us end
  -- the window is (at - period, at]; the marker's score, <= 0, is never in it
  local lo = at - period_us
  if lo < 0 then lo = 0 end
  local count = 0
  if newest and newest > lo then count = redis.call('ZCOUNT', key, '(' .. fmt('%d', lo), '+inf') end
  local ok, never, retry_us, units = false, cost > limit, 0, 0
  if not never then
    if cost == 0 or count + cost <= limit then ok = true end
  end
  local after = count -- the entries in the window after the call
  if settle then
    if mode == 'refund' then -- the newest entries go first
      units = count < cost and count or cost
      if units > give then give = units end
    else -- force: as far as twice the limit in its period (with one key, the least of its limits: grant)
      units = grant or 2 * limit - count
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      if k == 1 then grant = units end
    end
    if k > 1 then backs[i] = units end
    after = mode == 'refund' and count - units or count + units
    if after >= limit then -- the wait for one unit: until the (after - limit + 1)th oldest has left
      if after - limit >= count then
        retry_us = at + period_us - now -- one of force's new entries
      else
        local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', after - limit, 1)
        retry_us = nth[2] + period_us - now
      end
    end
  elseif ok then
    after, units = count + cost, cost
  elseif not never then
    -- wait until the oldest count + cost - limit entries have left the window
    local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    retry_us = nth[2] + period_us - now
  end
  local rem = after < limit and limit - after or 0
  local frac, per, cap = 0, 1, limit
  local reset_us = 0
  if after > 0 then
    if mode == 'refund' then -- the newest entry left
      reset_us = (units > 0 and redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', after - 1, 1)[2] or newest) + period_us - now
    elseif units > 0 then
      reset_us = at + period_us - now
    else
      reset_us = newest + period_us - now
    end
  end
  -- ---- This limit's verdict (scripts/src/verdict.lua) ----
  -- The reply describes the binding limit: on an admission the one with
  -- the fewest units left (rem + frac / per, exactly), on a denial the
  -- denying one with the longest retry_after_ms (-1, never, counts as
  -- longest); for refund and force the one with the longest wait for one
  -- unit after the call, in whole ms as reported, then the fewest units
  -- left; ties go to the earlier.
  if reset_us > ttl_us then ttl_us = reset_us end
  if not least or rem < least then least = rem end
  if settle then touched = units > 0 end -- with several keys, a key whose limit a refund or force left as it was is not written
  if ok or settle then
    if not ok then short = true end
    if units > 0 then changed = true end
    -- fewer units left than the binding limit so far: by whole units first,
    -- then by the parts of a unit left: at once for the same per, else by
    -- less's exact case without a call (some 600 instructions), else by
    -- less (a loop as long as Euclid's)
    local fewer = not a_i or rem < a_rem
    if not fewer and rem == a_rem then
      if per == a_per then
        fewer = frac < a_frac
      else
        local x, y = frac * a_per, a_frac * per
        if x < 9007199254740992 and y < 9007199254740992 then fewer = x < y else fewer = less(frac, per, a_frac, a_per) end
      end
    end
    if settle and a_i then -- the longest wait in whole ms first
      local r, ar = (retry_us + -retry_us % 1000) / 1000, (a_retry + -a_retry % 1000) / 1000
      if r ~= ar then fewer = r > ar end
    end
    if fewer then
      a_i, a_frac, a_per, a_rem, a_reset, a_cap, a_units, a_retry = i, frac, per, rem, reset_us, cap, units, retry_us
    end
  else
    allowed = false
    local retry = never and -1 or (retry_us + -retry_us % 1000) / 1000 -- whole ms, rounded up
    if not d_i or (d_retry ~= -1 and (retry == -1 or retry > d_retry)) then
      d_i, d_retry, d_rem, d_reset, d_cap = i, retry, rem, reset_us, cap
    end
  end
end
  -- ---- upto's passes (scripts/src/upto.lua) ----
  -- After the measuring pass, the grant is the fewest whole units a limit
  -- has left, at most the units asked for; a grant of none is decided as a
  -- check of one unit: a denial, whose wait is the wait for one unit.
  if mode ~= 'upto' or cost > 0 or want == 0 then break end
  cost = least < want and least or want
  if cost == 0 then cost, mode = 1, 'check' end
until false

-- ---- The one write step: add (or remove), trim, expire ----
-- ZADD comes first: under maxmemory (OOM) Redis refuses a script's first
-- write before anything is written, and checks no later command of the
-- script. With several keys, each key in turn, from the last (the loop
-- above left its log in the locals) to KEYS[1], as a one-key call with
-- its limit: its entries at its time, kept for its limit's period.
if allowed and writes and changed then
  local add = mode == 'force' and grant or cost
  while true do
    local at_s = fmt('%d', at)
    if mode == 'refund' then
      local back = k > 1 and backs[i] or give
      if back > 0 then redis.call('ZREMRANGEBYRANK', key, -back, -1) end -- the newest entries (the marker, <= 0, ranks first)
    else
      if mode == 'force' and k > 1 then add = backs[i] end
      -- The marker holds 2 * seq + sign: entries are numbered seq + 1, ...
      -- with sign 0, -(seq + 1), ... with sign 1. Past 2^52 - 1 the sequence
      -- starts again from 1 with the other sign, so that no entry held is
      -- renumbered or replaced (bounded work: no entry is touched but those
      -- this call adds).
      local sign = last_seq % 2
      local seq = (last_seq - sign) / 2
      if seq + add > 4503599627370495 then
        seq = 0
        sign = 1 - sign
      end
      local batch, j = { -(2 * (seq + add) + sign), TAG }, 2
      for e = 1, add do
        batch[j + 1] = at_s
        batch[j + 2] = sign == 0 and seq + e or -(seq + e)
        j = j + 2
        if j >= 4000 or e == add then -- unpack() has a stack of about 8000
          redis.call('ZADD', key, unpack(batch, 1, j))
          j = 0
        end
      end
      if add == 0 then redis.call('ZADD', key, -last_seq, TAG) end
    end
    -- Trim what every window has left: all of it with one key; with k
    -- keys at most 10000 / k entries a key (the oldest; the rest later).
    local lo_s = fmt('%d', at - longest)
    if k == 1 then
      redis.call('ZREMRANGEBYSCORE', key, '(0', lo_s)
    else
      local expired = redis.call('ZCOUNT', key, '(0', lo_s)
      local most = (10000 - 10000 % k) / k
      if expired > 0 then redis.call('ZREMRANGEBYRANK', key, 1, expired < most and expired or most) end
    end
    local top = mode ~= 'refund' and add > 0 and { at_s, at } or redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if top[2] then
      local keep_us = top[2] + longest - now
      redis.call('PEXPIRE', key, fmt('%d', (keep_us + -keep_us % 1000) / 1000)) -- as text, as write.lua's TTL
    else
      redis.call('DEL', key) -- no entry left: equal to no state
    end
    if k == 1 or i == 1 then break end
    i = i - 1
    key, last_seq, at, longest = keys[i], logs[3 * i - 2], logs[3 * i], (i > 1 and argv[3 * i + 1] or period1) * 1000
  end
end

-- ---- The reply (scripts/src/reply.lua) ----
-- Field 7 is the units recorded on the binding limit (what a check would).
-- refund and force describe the key after the call, with the wait until
-- one unit would be admitted; force is allowed when the empty mode would
-- be.
if settle then return { (short and mode == 'force') and 0 or 1, a_rem, (a_retry + -a_retry % 1000) / 1000, (a_reset + -a_reset % 1000) / 1000, a_cap, a_i, a_units } end
if allowed then return { 1, a_rem, 0, (a_reset + -a_reset % 1000) / 1000, a_cap, a_i, a_units } end
return { 0, d_rem, d_retry, (d_reset + -d_reset % 1000) / 1000, d_cap, d_i, 0 }
