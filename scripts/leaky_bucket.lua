-- redisrate leaky_bucket.lua: leaky bucket as a meter: the level drains continuously at limit per period_ms.
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
--   1 limit      units per period_ms, from 1 to 10^12
--   2 period_ms  the period in milliseconds, from 1 to 10^12
--   3 burst      capacity: the most units available at once; 0 or absent means limit
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
--   5 capacity        the binding limit's capacity (burst)
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
-- Algorithm: leaky bucket as a meter. Each request pours its cost into a
-- bucket of capacity burst that leaks continuously at limit per period_ms; a
-- request is admitted when it fits. It decides exactly as gcra.lua does
-- (level.lua, written once for both) and its state reads as a meter.
-- State (v4): "lb:4 x t" for each limit: a level of x / period_us units at
-- time t microseconds, x a whole number of up to 26 digits (10^12 units of
-- 366 days reach 3.2 * 10^25). No limit or burst changes what x means:
-- raised limits never deny what the old admit, lowered never admit what
-- they deny (guarantee 12). A state is read as at most twice the capacity
-- as of t, so a debt of other limits is forgiven past that; refund and
-- force change the level itself by their units, and write none of that
-- forgiveness back. A clock that steps back decides as of t. (v3's
-- "lb:3 x t" held x below 2^53 only.)
-- Modes: upto takes what every limit grants; refund lowers the level, never
-- below empty; force raises it as far as twice the capacity (a debt).
-- Exact for every limit, burst and cost up to 10^12 and period_ms up to 366
-- days whose full drain (burst * period_ms / limit) is at most 10^12 ms.
-- Never more admitted in any span of t ms than burst + limit * t / period_ms.

-- ---- String functions (scripts/src/strings.lua) ----
-- The string functions of every call are fetched here, the rare ones where
-- they are used, through a string's metatable: a Functions library may not
-- read the globals (string, math) while it loads.
local find, match, fmt = ('').find, ('').match, ('').format

-- ---- The common call: one key, one limit (scripts/src/fast.lua) ----
-- GENERATED COPY, specialized for the most common call: the generator writes
-- here the sections below and the algorithm's own lines for one key and one
-- limit, without the loop over limits and the choice of a binding limit. It
-- decides exactly as the general code below (scripts/fast_test.go holds the
-- two to the same replies, writes and TTLs), and leaves to it every call it
-- does not take: several keys or limits, an argument not in its plain form,
-- a combination past the always-accepted range, a key that does not hold
-- one limit's state. Those calls then read TIME and the key once more.
repeat
  -- KEYS and ARGV are globals in a script: each is read once.
  local keys, argv = KEYS, ARGV
  local key, ls, ps, bs = keys[1], argv[1], argv[2], argv[3]
  if not ps or not key or keys[2] or bs and argv[6] then break end -- (argv[6]: a further limit; bs first, absent in the common call)
  -- Each number read fresh into a local (gopher-lua mis-assigns "x = f() and
  -- y" to a local that exists); a value past its maximum falls through, so
  -- 16 digits and more need no check of their own.
  -- (A script first compares period_ms with a second, a minute, an hour
  -- and a day: src/macros.lua, fastperiod.)
  local limit1, period1 = #ls < 16 and find(ls, '^[1-9]%d*$') and ls + 0, ps == '1000' and 1000 or ps == '60000' and 60000 or ps == '3600000' and 3600000 or ps == '86400000' and 86400000 or #ps < 16 and find(ps, '^[1-9]%d*$') and ps + 0
  if not (limit1 and period1 and limit1 >= 1 and limit1 <= 1000000000000 and period1 >= 1 and period1 <= 1e12) then break end
  local burst1, cost, mode = limit1, 1, ''
  if bs then -- the optional arguments, when there are any (the common call has none)
    local cs = argv[4]
    mode = argv[5] or ''
    if bs ~= '' then
      local b = #bs < 16 and find(bs, '^[1-9]%d*$') and bs + 0
      if not b or b > 1000000000000 then break end
      if b > 0 then burst1 = b end
    end
    if cs and cs ~= '' then
      local c = cs == '1' and 1 or cs == '0' and 0 or #cs < 16 and find(cs, '^[1-9]%d*$') and cs + 0 -- (1, the default, and 0, a peek, by comparison, as periods)
      if not c or c > 1e15 then break end
      cost = c
    end
    if mode ~= '' and mode ~= 'check' and mode ~= 'upto' and mode ~= 'refund' and mode ~= 'force' then break end
  end
  -- Within the range without its exact rule: max(limit, burst) * period_ms
  -- at most 4 * 10^12, or the default burst (its drain is its period) with
  -- a period of at most 366 days; the general code checks the others.
  if (burst1 > limit1 and burst1 or limit1) * period1 > 4e12 and (burst1 > limit1 or period1 > 31622400000) then break end
  local now
  do
    local t = redis.call('TIME')
    local secs = t[1] -- the library reads it from NUM: the seconds change once a second
    now = secs * 1000000 + t[2]
  end
  -- The state of exactly one limit, read as state.lua reads it.
  local raw = redis.pcall('GET', key)
  local s1, s2
  if raw then
    if raw.err then break end
    local t1, t2 = match(raw, '^lb:4 ([1-9]%d*) ([1-9]%d*)$')
    if not t1 then break end
    if #t1 > 16 then break end
    if #t2 > 16 then break end
    s1 = t1 + 0
    s2 = t2 + 0
    if not (s1 <= 9007199254740991) then break end
    if not (s2 <= 8835955200000000) then break end
  end
  local i = 1 -- the one limit
  -- The modes as the general code takes them (loop.lua, upto.lua): refund
  -- and force act whatever the limit decides; upto runs the limit twice,
  -- at cost 0 to measure what it grants, then taking that.
  local settle, want = mode == 'refund' or mode == 'force', cost
  if mode == 'upto' then cost = 0 end
  repeat -- upto's passes
  local writes = cost > 0 and mode ~= 'check' -- only an admitted request with a cost, not a check, records
  -- This limit's arguments and its state, x at time t (nil: none): the
  -- first limit's in locals, the others' in argv (as numbers by now) and in
  -- more.
  local limit, b, burst, x, t = limit1, period1 * 1000, burst1, s1, s2
  local xmax, text = burst * b -- text: the level to write, past 2^53 (deep.lua's)
  if not t then x, t = 0, now end
  local ok, never, retry_us, units = false, cost > burst, 0, 0
  local rem, frac, reset_us -- (one LOADNIL: set by both paths below)
  if xmax > 4503599627370496 or x ~= x + 0 or x > 2 * xmax then -- past 2^53 (x ~= x + 0: its text), or a state past twice the capacity
    if b < 140737488355328 or xmax > 4503599627370496 then
      -- (A script defines deep.lua's functions here, where only the calls
      -- past 2^53 make their closures; the library has them already.)
-- ---- Exact products past 2^53 (scripts/src/exact.lua) ----
-- Lua's numbers are doubles, exact only below 2^53. Where a product of the
-- accepted range passes it (a level of a billion units a month in units of
-- 1/period_us, a window's count weighted by microseconds), muldiv gives
-- floor(a * m / c) and a * m % c exactly, for whole a, m >= 0 below 2^53 and
-- c from 1 below 2^47 whose quotient is below 2^53: the quotient estimated
-- in doubles (off by at most 3), the remainder a * m - q * c computed
-- exactly modulo 2^50 (low: the product's low bits from 25-bit halves,
-- every partial product below 2^53), where it lies within 4c < 2^49 of 0,
-- then q corrected. Only calls whose products may pass 2^53 run it.
local function low(a, m) -- a * m % 2^50
  local a0, m0 = a % 33554432, m % 33554432
  local a1, m1 = (a - a0) / 33554432, (m - m0) / 33554432
  local mid = (a1 * m0 % 33554432 + a0 * m1 % 33554432) % 33554432
  return (mid * 33554432 + a0 * m0) % 1125899906842624
end
local function muldiv(a, m, c)
  local x = a * m
  if x < 9007199254740992 then -- exact already
    local r = x % c
    return (x - r) / c, r
  end
  local q = x / c
  q = q - q % 1
  local r = (low(a, m) - low(q, c)) % 1125899906842624
  if r >= 562949953421312 then r = r - 1125899906842624 end
  while r < 0 do
    q = q - 1
    r = r + c
  end
  while r >= c do
    q = q + 1
    r = r - c
  end
  return q, r
end
-- ---- The level past 2^53 (scripts/src/deep.lua) ----
-- In the accepted range a level x reaches 6.4 * 10^25 (twice 10^12 units
-- of 366 days): here it is split into u whole units and p parts of a unit,
-- x = u * period_us + p with 0 <= p < period_us, each below 2^53, as is
-- every time and every wait; each product of two of them goes through
-- muldiv (exact.lua). The state keeps x as its decimal text.
-- ceil_div is ceil((k * b + f) / d), for whole k, f >= 0 and d >= 1.
local function ceil_div(k, b, f, d)
  local q, r = muldiv(k, b, d)
  r = r + f
  local s = r % d
  return q + (r - s) / d + (s > 0 and 1 or 0)
end
-- drain is the level u, p after e microseconds at limit per microsecond.
local function drain(u, p, e, limit, b)
  local x, d = u * b + p, e * limit -- (in doubles, each within 2^-52 of the exact: apart by more, they decide)
  if d > x * 1.000000000001 then return 0, 0 end
  if d > x * 0.999999999999 and x / limit < 9007199254740992 and e >= ceil_div(u, b, p, limit) then return 0, 0 end -- (else it takes longer than any e)
  local q, r = muldiv(e, limit, b) -- below x / b: below u + 1
  u = u - q
  p = p - r
  if p < 0 then
    p = p + b
    u = u - 1
  end
  return u, p
end
-- split is x (a number below 2^53, or the text of a larger one, state.lua)
-- as u, p for a period of b microseconds: the text's last 14 digits and the
-- rest, hi * 10^14 + lo, divided by b (hi has no leading zero: state.lua).
local function split(x, b)
  if x == x + 0 then
    local p = x % b
    return (x - p) / b, p
  end
  local hi, lo = ('').sub(x, 1, #x - 14) + 0, ('1' .. ('').sub(x, -14)) - 1e14 -- (a 1 before the zeros the last 14 may start with: gopher-lua reads 010 as octal)
  if hi >= b then return 17592186044417, 0 end -- past 10^14 units: more than any limit writes
  local q, r = muldiv(hi, 1e14, b)
  r = r + lo
  local p = r % b
  return q + (r - p) / b, p
end
-- decimal is the level u * b + p as a decimal number: in base 10^7, from
-- products of 7-digit halves, each below 2^53.
local function decimal(u, p, b)
  local x = u * b + p
  if x < 9007199254740992 then return fmt('%d', x) end -- exact
  local ul, bl = u % 1e7, b % 1e7
  local uh, bh = (u - ul) / 1e7, (b - bl) / 1e7
  local s0 = ul * bl + p
  local c0 = s0 % 1e7
  local s1 = uh * bl + ul * bh + (s0 - c0) / 1e7
  local c1 = s1 % 1e7
  return fmt('%d%07d%07d', uh * bh + (s1 - c1) / 1e7, c1, c0)
end
-- deep is level.lua's decision for one limit on the level x at time t, for
-- any level and any limit of the range; mode is refund, force or false.
-- The state's level, drained, is what refund and force change by their
-- units, so that no forgiveness is written back (guarantee 12); the read
-- is that level at most twice the capacity as of t, drained; an admission
-- records on the read. It returns what level.lua sets: ok, retry_us,
-- units, rem and frac (the units left: rem + frac / b), reset_us, and the
-- level to write, as text, and its time.
local function deep(x, t, now, limit, b, burst, cost, mode)
  local u, p = split(x, b)
  if u > 17592186044416 then -- 2^44 units: past anything a limit writes
    u = 17592186044416
    p = 0
  end
  local top = 2 * burst
  local cu, cp = u, p -- the read
  if cu > top or cu == top and cp > 0 then
    cu = top
    cp = 0
  end
  if now > t then
    local same = cu == u and cp == p -- (the read is the state's level: one drain for both)
    u, p = drain(u, p, now - t, limit, b)
    if same then cu, cp = u, p else cu, cp = drain(cu, cp, now - t, limit, b) end
    t = now
  end
  local k = cu + cost - burst -- the units past the capacity a call of cost would leave (and cp / b more)
  local ok, units, retry_us = cost == 0 or k < 0 or k == 0 and cp == 0, 0, 0
  if mode then
    if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
      if cost > u or cost == u and p == 0 then
        units = u + (p > 0 and 1 or 0)
        u = 0
        p = 0
      else
        units = cost
        u = u - cost
      end
    else -- force: cost units, as far as twice the capacity
      units = top - u - (p > 0 and 1 or 0)
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      u = u + units
    end
    cu, cp = u, p -- what the next call reads
    if cu > top or cu == top and cp > 0 then
      cu = top
      cp = 0
    end
    k = cu + 1 - burst -- the wait for one unit, after
    if k > 0 or k == 0 and cp > 0 then retry_us = t - now + ceil_div(k, b, cp, limit) end
  else
    if ok then
      cu = cu + cost
      units = cost
    elseif cost <= burst then
      retry_us = t - now + ceil_div(k, b, cp, limit)
    end
    u, p = cu, cp
  end
  local rem, frac, reset_us = burst - cu, 0, 0
  if cp > 0 then
    rem = rem - 1
    frac = b - cp
  end
  if rem < 0 then
    rem = 0
    frac = 0
  end
  if cu > 0 or cp > 0 then reset_us = t - now + ceil_div(cu, b, cp, limit) end
  return ok, retry_us, units, rem, frac, reset_us, decimal(u, p, b), t
end
      ok, retry_us, units, rem, frac, reset_us, text, t = deep(x, t, now, limit, b, burst, cost, settle and mode)
    else
      x = 2 * xmax -- (a period past 4 years, past exact.lua's bound on b: read at most twice the capacity)
    end
  end
  if not text then
    -- Drained to now. A clock behind t (it stepped back) decides as of t,
    -- and its waits are longer by t - now (guarantee 9).
    if now > t then
      local drained = (now - t) * limit -- (past 2^53 only when it is past x)
      if drained >= x then x = 0 else x = x - drained end
      t = now
    end
    if not never then
      local over = x - (xmax - cost * b) -- x + cost * b - xmax, without the sum, which could pass 2^53
      if over <= 0 or cost == 0 then ok = true else retry_us = t - now + (over + -over % limit) / limit end
    end
    if settle then
      if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
        local give = x
        if cost <= 2 * burst and cost * b < x then give = cost * b end
        units, x = (give + -give % b) / b, x - give
      else -- force: cost units, as far as twice the capacity
        local room = 2 * xmax - x
        units = (room - room % b) / b
        if cost < units then units = cost end
        x = x + units * b
      end
      local over = x - (xmax - b) -- the wait for one unit, after
      retry_us = over > 0 and t - now + (over + -over % limit) / limit or 0
    elseif ok then
      x, units = x + cost * b, cost
    end
    local room = xmax - x
    if room < 0 then room = 0 end
    frac = room % b
    rem = (room - frac) / b -- units left: rem + frac / b
    reset_us = x > 0 and t - now + (x + -x % limit) / limit or 0
  end
  local cap, per = burst, b
  local allowed, out = ok
  if (ok or settle) and writes then
    if text then out = 'lb:4 ' .. text .. fmt(' %d', t) else out = fmt('lb:4 %d %d', x, t) end
  end
  -- upto's grant after the measuring pass (upto.lua): then the pass again.
  if mode == 'upto' and cost == 0 and want > 0 then
    cost = rem < want and rem or want
    if cost == 0 then cost, mode = 1, 'check' end
  else
    -- The one write and the reply, for the one limit (write.lua, reply.lua).
    local reset_ms = (reset_us + -reset_us % 1000) / 1000 -- whole ms, rounded up
    if settle then
      if units > 0 and writes then
        if reset_ms > 0 then redis.call('PSETEX', key, fmt('%d', reset_ms), out) else redis.call('DEL', key) end
      end
      return { (ok or mode == 'refund') and 1 or 0, rem, (retry_us + -retry_us % 1000) / 1000, reset_ms, cap, 1, units }
    end
    if allowed then
      if writes then redis.call('PSETEX', key, fmt('%d', reset_ms), out) end -- the TTL as text (write.lua)
      return { 1, rem, 0, reset_ms, cap, 1, cost }
    end
    return { 0, rem, never and -1 or (retry_us + -retry_us % 1000) / 1000, reset_ms, cap, 1, 0 }
  end
  until false
until true
-- ---- leaky_bucket's constants (from its manifest) ----
local NAME, TAG = 'leaky_bucket', 'lb:4'
local MAX_LIMIT, LIMIT_RULE, BURST_RULE = 1000000000000, 'must be a whole number from 1 to 10^12', 'must be a whole number up to 10^12, or 0 or empty for limit'
local TIME_AT, TIME_MAX = 2, 8835955200000000 -- which of a limit's fields is a recorded time (0: none), and its range: up to the year 2250
local FIELDS, STATE = 2, '^lb:4 (%d+) (%d+)(.*)$' -- the numbers of one limit; the state: the first limit's, then the rest

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

-- ---- Exact products past 2^53 (scripts/src/exact.lua) ----
-- Lua's numbers are doubles, exact only below 2^53. Where a product of the
-- accepted range passes it (a level of a billion units a month in units of
-- 1/period_us, a window's count weighted by microseconds), muldiv gives
-- floor(a * m / c) and a * m % c exactly, for whole a, m >= 0 below 2^53 and
-- c from 1 below 2^47 whose quotient is below 2^53: the quotient estimated
-- in doubles (off by at most 3), the remainder a * m - q * c computed
-- exactly modulo 2^50 (low: the product's low bits from 25-bit halves,
-- every partial product below 2^53), where it lies within 4c < 2^49 of 0,
-- then q corrected. Only calls whose products may pass 2^53 run it.
local function low(a, m) -- a * m % 2^50
  local a0, m0 = a % 33554432, m % 33554432
  local a1, m1 = (a - a0) / 33554432, (m - m0) / 33554432
  local mid = (a1 * m0 % 33554432 + a0 * m1 % 33554432) % 33554432
  return (mid * 33554432 + a0 * m0) % 1125899906842624
end
local function muldiv(a, m, c)
  local x = a * m
  if x < 9007199254740992 then -- exact already
    local r = x % c
    return (x - r) / c, r
  end
  local q = x / c
  q = q - q % 1
  local r = (low(a, m) - low(q, c)) % 1125899906842624
  if r >= 562949953421312 then r = r - 1125899906842624 end
  while r < 0 do
    q = q - 1
    r = r + c
  end
  while r >= c do
    q = q + 1
    r = r - c
  end
  return q, r
end
-- ---- The level's range and its exact arithmetic (scripts/src/continuous.lua) ----
-- out_of_range names the argument at fault in a combination the script
-- refuses, or nil: every limit and burst up to 10^12 with a period_ms up to
-- 366 days whose full drain, burst * period_ms / limit, is at most 10^12 ms
-- is accepted, and so is every call whose level of twice the capacity,
-- 2 * burst * period_us, stays within 2^53 (level.lua's cheap case). (Only
-- run past the first check in args.lua.)
local function out_of_range(limit, period_ms, burst)
  if 2 * burst * period_ms * 1000 <= 9007199254740992 then return nil end -- (a multiple of 2000: exact to 2^54)
  if period_ms > 31622400000 then return 'period_ms' end
  if burst > limit and less(1e12, period_ms, burst, limit) then return 'burst' end -- 10^12 < burst * period_ms / limit, exactly
  return nil
end
-- ---- The level past 2^53 (scripts/src/deep.lua) ----
-- In the accepted range a level x reaches 6.4 * 10^25 (twice 10^12 units
-- of 366 days): here it is split into u whole units and p parts of a unit,
-- x = u * period_us + p with 0 <= p < period_us, each below 2^53, as is
-- every time and every wait; each product of two of them goes through
-- muldiv (exact.lua). The state keeps x as its decimal text.
-- ceil_div is ceil((k * b + f) / d), for whole k, f >= 0 and d >= 1.
local function ceil_div(k, b, f, d)
  local q, r = muldiv(k, b, d)
  r = r + f
  local s = r % d
  return q + (r - s) / d + (s > 0 and 1 or 0)
end
-- drain is the level u, p after e microseconds at limit per microsecond.
local function drain(u, p, e, limit, b)
  local x, d = u * b + p, e * limit -- (in doubles, each within 2^-52 of the exact: apart by more, they decide)
  if d > x * 1.000000000001 then return 0, 0 end
  if d > x * 0.999999999999 and x / limit < 9007199254740992 and e >= ceil_div(u, b, p, limit) then return 0, 0 end -- (else it takes longer than any e)
  local q, r = muldiv(e, limit, b) -- below x / b: below u + 1
  u = u - q
  p = p - r
  if p < 0 then
    p = p + b
    u = u - 1
  end
  return u, p
end
-- split is x (a number below 2^53, or the text of a larger one, state.lua)
-- as u, p for a period of b microseconds: the text's last 14 digits and the
-- rest, hi * 10^14 + lo, divided by b (hi has no leading zero: state.lua).
local function split(x, b)
  if x == x + 0 then
    local p = x % b
    return (x - p) / b, p
  end
  local hi, lo = ('').sub(x, 1, #x - 14) + 0, ('1' .. ('').sub(x, -14)) - 1e14 -- (a 1 before the zeros the last 14 may start with: gopher-lua reads 010 as octal)
  if hi >= b then return 17592186044417, 0 end -- past 10^14 units: more than any limit writes
  local q, r = muldiv(hi, 1e14, b)
  r = r + lo
  local p = r % b
  return q + (r - p) / b, p
end
-- decimal is the level u * b + p as a decimal number: in base 10^7, from
-- products of 7-digit halves, each below 2^53.
local function decimal(u, p, b)
  local x = u * b + p
  if x < 9007199254740992 then return fmt('%d', x) end -- exact
  local ul, bl = u % 1e7, b % 1e7
  local uh, bh = (u - ul) / 1e7, (b - bl) / 1e7
  local s0 = ul * bl + p
  local c0 = s0 % 1e7
  local s1 = uh * bl + ul * bh + (s0 - c0) / 1e7
  local c1 = s1 % 1e7
  return fmt('%d%07d%07d', uh * bh + (s1 - c1) / 1e7, c1, c0)
end
-- deep is level.lua's decision for one limit on the level x at time t, for
-- any level and any limit of the range; mode is refund, force or false.
-- The state's level, drained, is what refund and force change by their
-- units, so that no forgiveness is written back (guarantee 12); the read
-- is that level at most twice the capacity as of t, drained; an admission
-- records on the read. It returns what level.lua sets: ok, retry_us,
-- units, rem and frac (the units left: rem + frac / b), reset_us, and the
-- level to write, as text, and its time.
local function deep(x, t, now, limit, b, burst, cost, mode)
  local u, p = split(x, b)
  if u > 17592186044416 then -- 2^44 units: past anything a limit writes
    u = 17592186044416
    p = 0
  end
  local top = 2 * burst
  local cu, cp = u, p -- the read
  if cu > top or cu == top and cp > 0 then
    cu = top
    cp = 0
  end
  if now > t then
    local same = cu == u and cp == p -- (the read is the state's level: one drain for both)
    u, p = drain(u, p, now - t, limit, b)
    if same then cu, cp = u, p else cu, cp = drain(cu, cp, now - t, limit, b) end
    t = now
  end
  local k = cu + cost - burst -- the units past the capacity a call of cost would leave (and cp / b more)
  local ok, units, retry_us = cost == 0 or k < 0 or k == 0 and cp == 0, 0, 0
  if mode then
    if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
      if cost > u or cost == u and p == 0 then
        units = u + (p > 0 and 1 or 0)
        u = 0
        p = 0
      else
        units = cost
        u = u - cost
      end
    else -- force: cost units, as far as twice the capacity
      units = top - u - (p > 0 and 1 or 0)
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      u = u + units
    end
    cu, cp = u, p -- what the next call reads
    if cu > top or cu == top and cp > 0 then
      cu = top
      cp = 0
    end
    k = cu + 1 - burst -- the wait for one unit, after
    if k > 0 or k == 0 and cp > 0 then retry_us = t - now + ceil_div(k, b, cp, limit) end
  else
    if ok then
      cu = cu + cost
      units = cost
    elseif cost <= burst then
      retry_us = t - now + ceil_div(k, b, cp, limit)
    end
    u, p = cu, cp
  end
  local rem, frac, reset_us = burst - cu, 0, 0
  if cp > 0 then
    rem = rem - 1
    frac = b - cp
  end
  if rem < 0 then
    rem = 0
    frac = 0
  end
  if cu > 0 or cp > 0 then reset_us = t - now + ceil_div(cu, b, cp, limit) end
  return ok, retry_us, units, rem, frac, reset_us, decimal(u, p, b), t
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
  local given = false -- a burst of its own, named when the range is exceeded
  if bs ~= '' then
    local b = #bs < 16 and find(bs, '^[1-9]%d*$') and bs + 0 or whole(bs)
    if not b or b > MAX_LIMIT then
      return invalid('burst', i, bs, BURST_RULE)
    end
    if b > 0 then burst, given = b, true end
  end
  -- The accepted range (out_of_range): first a check that the common calls
  -- pass at once, max(limit, burst) * period_ms <= 4 * 10^12.
  if (burst > limit and burst or limit) * period_ms > 4e12 then
    local fault = out_of_range(limit, period_ms, burst)
    if fault == 'period_ms' then
      return invalid('period_ms', i, ps, fmt('must be at most 31622400000 (366 days) with limit %d' .. (given and ' and burst %d' or ''), limit, burst))
    elseif fault then
      return invalid('burst', i, bs, fmt('must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit %d and period_ms %d', limit, period_ms))
    end
  end
  if i == 1 then
    if nargs > 3 then -- cost and mode (absent arguments cost a lookup each)
      local cs = argv[4]
      mode = argv[5] or ''
      if cs ~= '' then
        cost = #cs < 16 and find(cs, '^[1-9]%d*$') and cs + 0 or whole(cs)
        if not cost or cost > 1e15 then return invalid('cost', 1, cs, 'must be a whole number from 0 to 10^15') end
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

-- ---- State (scripts/src/state.lua) ----
-- The value is the tag, then FIELDS whole numbers for each of 1 to 8 limits,
-- separated by single spaces: no leading zeros, each below 2^53, a recorded
-- time (TIME_AT) no later than TIME_MAX, a level (gcra's, leaky_bucket's)
-- of up to 26 digits, kept as its text past 2^53 - 1. Anything else
-- (another type, a user's value, another script's or version's state) is
-- refused, untouched.
-- n limits' state is read in one match into a table (limit j's field f at
-- FIELDS * (j - 1) + f), one limit's into locals, another number of limits'
-- field by field. With several keys, key i holds limit i's state, read as a
-- one-limit call reads it, and an error names it (key #i).
local slots, i, s1, s2 -- with several keys, their numbers and the key read; the first limit's (nil: none)
local more -- every limit's numbers, FIELDS each, when the state holds several limits'
while true do -- KEYS[1], then with several keys each in turn
  local raw = redis.pcall('GET', key)
  if raw then
    if raw.err then -- pcall's error reply: another type (a string's .err is nil)
      return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value of another type, not ' .. NAME .. ' state: left untouched')
    end
    -- Each number: at most 16 digits (a level 26), no leading zero (such a
    -- field reads below 10^(digits - 1), on gopher-lua too, which reads 010
    -- as octal), and at most its maximum: TIME_MAX for a recorded time, else
    -- 2^53 - 1 (a level: 10^26, its text kept past 2^53 - 1, which reads
    -- rounded).
    if k == 1 and n > 1 then more = { match(raw, '^' .. TAG .. ('').rep(' ([1-9]%d*) ([1-9]%d*)', n) .. '$') } end -- n limits' (the library makes the patterns at load)
    local good = more and more[1] ~= nil
    if not good then
      local t1, t2, rest = match(raw, STATE)
      good = rest ~= nil
      if good and rest == '' then -- one limit's
        s1 = #t1 <= 26 and t1 + 0
        s2 = #t2 <= 16 and t2 + 0
        good = good and s1 and (#t1 == 1 or s1 >= 10 ^ (#t1 - 1)) and s1 <= 1e26
        good = good and s2 and (#t2 == 1 or s2 >= 10 ^ (#t2 - 1)) and s2 <= TIME_MAX
        if good and s1 > 9007199254740991 then s1 = t1 end
      elseif good then -- another number of limits: " n n ..." exactly, FIELDS each, up to 8 limits
        more = { t1, t2 }
        local read = 0
        for f in ('').gmatch(rest, ' (%d+)') do read = read + 1 + #f; more[#more + 1] = f end
        good = read == #rest and #more % FIELDS == 0 and #more <= 8 * FIELDS and not find(raw, ' 0%d') -- no leading zero (FULL's pattern takes none in a time)
      end
    end
    if good and more and more[1] then -- each limit's fields in turn, each checked as one limit's (more is empty after a failed match)
      for j = 0, #more - 1, FIELDS do
        local f = more[j + 1]; local v = #f <= 26 and f + 0; if not (v and v <= 1e26) then good = false break end; more[j + 1] = v > 9007199254740991 and f or v
        local f = more[j + 2]; local v = #f <= 16 and f + 0; if not (v and v <= TIME_MAX) then good = false break end; more[j + 2] = v
      end
      s1 = more[1]
      s2 = more[2]
    end
    if not good then
      local other, which = ({ ['gcra:4'] = 'gcra', ['tb:2'] = 'token_bucket', ['lb:4'] = 'leaky_bucket', ['sw:2'] = 'sliding_window', ['fw:2'] = 'fixed_window' })[match(raw, '^(%S+) ') or ''], k > 1 and ' #' .. (i or 1) or ''
      if other and other ~= NAME then
        return redis.error_reply('ERR key' .. which .. ' holds ' .. other .. ' state, not ' .. NAME .. ' state: left untouched')
      end
      return redis.error_reply('ERR key' .. which .. ' holds a value that is not ' .. NAME .. ' state: left untouched')
    end
  end
  if k == 1 then break end
  -- Several keys: limit i's numbers go to slots, where the loop reads them
  -- as more, in the same places as one key's (limit i's field f at
  -- FIELDS * (i - 1) + f).
  if not slots then slots, i = {}, 1 end
  slots[(i - 1) * FIELDS + 1] = s1
  slots[(i - 1) * FIELDS + 2] = s2
  if i == k then
    s1 = slots[1]
    s2 = slots[2]
    more, key = slots, keys[1]
    break
  end
  s1, s2 = nil
  more = nil
  i = i + 1
  key = keys[i]
end
if n > 1 and not more then more = {} end -- no state yet, or one limit's: the further limits have none
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
-- ---- The level (scripts/src/level.lua): gcra's and leaky_bucket's decision ----
-- A level of x stands for x / period_us units: a unit is period_us of x, x
-- drains by limit each microsecond, and no limit or burst changes what it
-- means, so raised limits read the same level and only admit more
-- (guarantee 12). The capacity is burst * period_us; a state is read as at
-- most twice it (the debt force may leave), as of its time, so no wait
-- passes twice the time these limits take to drain their capacity. While
-- twice the capacity stays below 2^53 (and the state within it), x is exact
-- in a double and decided here; past it deep.lua decides, and x may be the
-- text of a level past 2^53 (state.lua).
for i = 1, n do
  -- This limit's arguments and its state, x at time t (nil: none): the
  -- first limit's in locals, the others' in argv (as numbers by now) and in
  -- more.
  local limit, b, burst, x, t = limit1, period1 * 1000, burst1, s1, s2
  if i > 1 then
    -- (keyed.lua) With several keys, the limit before is KEYS[i - 1]'s, and
    -- its record that key's whole state, kept with its own TTL (write.lua);
    -- false when a refund or force left it as it was.
    if k > 1 and allowed and writes then
      if not records then records = {} end
      records[2 * i - 3], records[2 * i - 2] = touched and out, ttl_us
      out, ttl_us = TAG, 0
    end
    limit, b, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    x, t = more[2 * i - 1], more[2 * i]
  end
  local xmax, text = burst * b -- text: the level to write, past 2^53 (deep.lua's)
  if not t then x, t = 0, now end
  local ok, never, retry_us, units = false, cost > burst, 0, 0
  local rem, frac, reset_us -- (one LOADNIL: set by both paths below)
  if xmax > 4503599627370496 or x ~= x + 0 or x > 2 * xmax then -- past 2^53 (x ~= x + 0: its text), or a state past twice the capacity
    if b < 140737488355328 or xmax > 4503599627370496 then
      ok, retry_us, units, rem, frac, reset_us, text, t = deep(x, t, now, limit, b, burst, cost, settle and mode)
    else
      x = 2 * xmax -- (a period past 4 years, past exact.lua's bound on b: read at most twice the capacity)
    end
  end
  if not text then
    -- Drained to now. A clock behind t (it stepped back) decides as of t,
    -- and its waits are longer by t - now (guarantee 9).
    if now > t then
      local drained = (now - t) * limit -- (past 2^53 only when it is past x)
      if drained >= x then x = 0 else x = x - drained end
      t = now
    end
    if not never then
      local over = x - (xmax - cost * b) -- x + cost * b - xmax, without the sum, which could pass 2^53
      if over <= 0 or cost == 0 then ok = true else retry_us = t - now + (over + -over % limit) / limit end
    end
    if settle then
      if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
        local give = x
        if cost <= 2 * burst and cost * b < x then give = cost * b end
        units, x = (give + -give % b) / b, x - give
      else -- force: cost units, as far as twice the capacity
        local room = 2 * xmax - x
        units = (room - room % b) / b
        if cost < units then units = cost end
        x = x + units * b
      end
      local over = x - (xmax - b) -- the wait for one unit, after
      retry_us = over > 0 and t - now + (over + -over % limit) / limit or 0
    elseif ok then
      x, units = x + cost * b, cost
    end
    local room = xmax - x
    if room < 0 then room = 0 end
    frac = room % b
    rem = (room - frac) / b -- units left: rem + frac / b
    reset_us = x > 0 and t - now + (x + -x % limit) / limit or 0
  end
  local cap, per = burst, b
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
  if allowed and writes then out = out .. (text and ' ' .. text .. fmt(' %d', t) or fmt(' %d %d', x, t)) end
end
  -- ---- upto's passes (scripts/src/upto.lua) ----
  -- After the measuring pass, the grant is the fewest whole units a limit
  -- has left, at most the units asked for; a grant of none is decided as a
  -- check of one unit: a denial, whose wait is the wait for one unit.
  if mode ~= 'upto' or cost > 0 or want == 0 then break end
  cost = least < want and least or want
  if cost == 0 then cost, mode = 1, 'check' end
until false

-- ---- The one write (scripts/src/write.lua) ----
-- An admitted request with a cost records, and so does a refund or a force
-- that changed a limit; a check never does. PSETEX is refused under
-- maxmemory (OOM) before it writes; the key expires when every limit is back
-- to empty, so no cleanup job is needed, and a key a refund left empty is
-- deleted. With several keys, each key a refund or force changed gets its
-- state and TTL, every PSETEX before any DEL: Redis refuses a script's
-- first write under OOM and no later one, so the first PSETEX fails before
-- any key is written (a DEL first would let the PSETEXes after it through).
if allowed and writes and changed then
  if k > 1 then
    records[2 * k - 1], records[2 * k] = touched and out, ttl_us
    for i = 1, k do
      local ttl = records[2 * i]
      if records[2 * i - 1] and ttl > 0 then redis.call('PSETEX', keys[i], fmt('%d', (ttl + -ttl % 1000) / 1000), records[2 * i - 1]) end
    end
    for i = 1, k do
      if records[2 * i - 1] and records[2 * i] <= 0 then redis.call('DEL', keys[i]) end
    end
  elseif ttl_us > 0 then
    redis.call('PSETEX', key, fmt('%d', (ttl_us + -ttl_us % 1000) / 1000), out) -- whole ms, rounded up, as text: Redis writes a number with %.17g, some 2,000 instructions
  else
    redis.call('DEL', key)
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
