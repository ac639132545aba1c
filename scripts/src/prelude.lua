-- ---------------------------------------------------------------------------
-- Shared prelude (scripts/src/prelude.lua): constants, the few helpers every
-- algorithm needs, then the validation of KEYS and ARGV, which returns an
-- error reply before anything else happens. Written once, copied into every
-- script by `go generate`, so each .lua file still stands alone.
--
-- It runs the same on Redis's Lua 5.1 and on gopher-lua (miniredis): no
-- tonumber() of strings with exponents, no integer division, no string.format
-- of numbers past 2^53, no multiple assignment whose right side reads a
-- variable assigned on its left (gopher-lua assigns left to right).
-- Top-level code instead of functions where it runs once: every function
-- here is a closure built again on each call, and that is most of a script's
-- cost in Redis.
-- ---------------------------------------------------------------------------
local MAX_LIMITS = 8
local MAX_NUMBER = 1e15
local MAX_PERIOD_MS = 1e12
local EXACT = 9007199254740992 -- 2^53: every integer up to here is exact in a double

local floor, fmod = math.floor, math.fmod
local match, sub, fmt = string.match, string.sub, string.format

-- parse_number reads a contract number: ^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$.
-- It returns value, mantissa, exponent (value = mantissa * 10^exponent, the
-- mantissa an integer), or nil when s is not such a number. 10^e is exact for
-- 0 <= e <= 22, in C's pow and in Go's alike.
local function parse_number(s)
  if #s <= 16 and match(s, '^%d+$') then
    local v = tonumber(s)
    return v, v, 0
  end
  local int, tail = match(s, '^(%d+)(.*)$')
  if not int then return nil end
  local frac = ''
  if sub(tail, 1, 1) == '.' then
    frac = match(tail, '^%.(%d+)')
    if not frac then return nil end
    tail = sub(tail, #frac + 2)
  end
  local exp = 0
  if tail ~= '' then
    local sign, digits = match(tail, '^[eE]([-+]?)(%d+)$')
    if not digits then return nil end
    if #digits > 6 then digits = '999999' end
    exp = tonumber(digits)
    if sign == '-' then exp = -exp end
  end
  local body, zeros = match(int .. frac, '^0*(.-)(0*)$')
  if body == '' then return 0, 0, 0 end
  exp = exp - #frac + #zeros
  local m = tonumber(body)
  if not m then
    -- gopher-lua (miniredis) gives nil for integers past 2^63, where Lua
    -- 5.1 gives the nearest double: 18 digits carry all a double holds.
    m = tonumber(sub(body, 1, 18)) * 10 ^ (#body - 18)
  end
  if exp > 22 then return math.huge, m, exp end
  if exp >= 0 then return m * 10 ^ exp, m, exp end
  if exp >= -22 then return m / 10 ^ -exp, m, exp end
  return m / 1e22 / 10 ^ (-exp - 22), m, exp
end

-- Exact integer division for integers 0 <= n, 0 < d, both below 2^53.
-- math.fmod is exact; floor(n / d) is not (n / d can round up to the next
-- integer), which is the classic off-by-one at rates like 3 per second.
local function idiv(n, d)
  return (n - fmod(n, d)) / d
end

local function cdiv(n, d)
  local r = fmod(n, d)
  if r == 0 then return n / d end
  return (n - r) / d + 1
end

-- Durations are kept in microseconds; replies round them up to milliseconds.
local function us_to_ms(us)
  if us <= 0 then return 0 end
  if us ~= floor(us) then us = floor(us) + 1 end
  return cdiv(us, 1000)
end

local function invalid(name, s, must)
  if #s > 40 then s = sub(s, 1, 40) .. '...' end
  return fmt("ERR invalid %s '%s': must be %s", name, s, must)
end

-- ---- Arguments: validated in full before the key is touched ----
if #KEYS ~= 1 then
  return redis.error_reply(fmt("ERR invalid numkeys '%d': must be 1 (the limiter's key)", #KEYS))
end
local key = KEYS[1]
local n_limits = 1
if #ARGV > 5 then
  local extra = #ARGV - 5
  n_limits = 1 + cdiv(extra, 3) -- a partial triple counts as a limit here
  if n_limits > MAX_LIMITS then
    return redis.error_reply(fmt('ERR too many limits (%d): must be at most %d', n_limits, MAX_LIMITS))
  end
  if extra % 3 ~= 0 then
    return redis.error_reply(fmt('ERR incomplete limit #%d: each further limit is the triple limit period_ms burst', n_limits))
  end
end

local cost_s = ARGV[4] or ''
local cost, cost_m, cost_e = 1, 1, 0
if cost_s ~= '' then
  cost, cost_m, cost_e = parse_number(cost_s)
  if not cost or cost > MAX_NUMBER or (WHOLE and cost_e < 0) then
    return redis.error_reply(invalid('cost', cost_s, (WHOLE and 'a whole number' or 'a number') .. ' >= 0, at most 1e15'))
  end
end
local mode = ARGV[5] or ''
if mode ~= '' and mode ~= 'check' then
  return redis.error_reply(invalid('mode', mode, "empty or 'check'"))
end
local check = mode == 'check'
local writes = cost > 0 and not check -- an admitted request records only then

-- Each limit in the scripts' integer units: unit = 10^decimals of limit and
-- burst makes both integers, and a/b (lowest terms) is the rate in units per
-- microsecond. Fields the algorithms add later are declared here too, so the
-- table is sized once.
local limits = {}
for i = 1, n_limits do
  local base = i == 1 and 0 or 5 + (i - 2) * 3
  local suffix = i == 1 and '' or ' #' .. i
  local limit_s, period_s, burst_s = ARGV[base + 1] or '', ARGV[base + 2] or '', ARGV[base + 3] or ''

  local limit, limit_m, limit_e = parse_number(limit_s)
  if not limit or limit <= 0 or limit > MAX_NUMBER or (WHOLE and limit_e < 0) then
    return redis.error_reply(invalid('limit' .. suffix, limit_s, 'a positive ' .. (WHOLE and 'whole ' or '') .. 'number, at most 1e15'))
  end
  local period, _, period_e = parse_number(period_s)
  if not period or period <= 0 or period > MAX_PERIOD_MS or period_e < 0 then
    return redis.error_reply(invalid('period_ms' .. suffix, period_s, 'a positive integer, at most 1e12'))
  end
  local burst, burst_m, burst_e = limit, limit_m, limit_e
  if burst_s ~= '' then
    local b, bm, be = parse_number(burst_s)
    if WINDOW then
      if not b or (b ~= 0 and b ~= limit) then
        return redis.error_reply(invalid('burst' .. suffix, burst_s, 'empty, 0 or equal to limit for ' .. NAME))
      end
    elseif not b or b > MAX_NUMBER or (WHOLE and be < 0) then
      return redis.error_reply(invalid('burst' .. suffix, burst_s, 'a positive number, at most 1e15, or 0 or empty for limit'))
    elseif b > 0 then
      burst, burst_m, burst_e = b, bm, be
    end
  end

  local decimals = -limit_e
  if -burst_e > decimals then decimals = -burst_e end
  if decimals < 0 then decimals = 0 end
  if decimals > 15 then
    return redis.error_reply(invalid('limit' .. suffix, limit_s, 'given with at most 15 decimals (burst too)'))
  end
  local limit_u, burst_u, cost_u = limit, burst, cost
  if decimals > 0 or limit_e ~= 0 or burst_e ~= 0 then
    -- m * 10^e is exact below 2^53, and 10^e past 10^22 is past every limit
    local e = limit_e + decimals
    limit_u = e > 22 and math.huge or limit_m * 10 ^ e
    e = burst_e + decimals
    burst_u = e > 22 and math.huge or burst_m * 10 ^ e
    e = cost_e + decimals
    cost_u = e < 0 and cost * 10 ^ decimals or (e > 22 and (cost_m == 0 and 0 or math.huge)) or cost_m * 10 ^ e
  end
  if limit_u > EXACT or burst_u > EXACT then
    return redis.error_reply(invalid('limit' .. suffix, limit_s, 'exact in whole units: limit and burst need fewer significant digits'))
  end
  local period_us = period * 1000
  local x, y = limit_u, period_us -- gcd(limit_u, period_us)
  while y ~= 0 do
    local r = fmod(x, y)
    x = y
    y = r
  end
  limits[i] = {
    limit = limit, period = period, period_us = period_us, burst = burst,
    unit = 10 ^ decimals, limit_u = limit_u, burst_u = burst_u, cost_u = cost_u,
    a = limit_u / x, b = period_us / x, xmax = 0, cx = 0,
    suffix = suffix, limit_s = limit_s, burst_s = burst_s ~= '' and burst_s or limit_s,
  }
end

-- too_large names the burst whose size would push a limit's arithmetic past
-- the exact range of a double.
local function too_large(lim, bound)
  return redis.error_reply(invalid('burst' .. lim.suffix, lim.burst_s, 'small enough for exact arithmetic with this limit and period_ms (burst * period_ms / limit, in microseconds, at most ' .. bound .. ')'))
end
-- ---- The clock: Redis TIME only, as integer microseconds (exact in a double) ----
local now
do
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- ---------------------------------------------------------------------------
-- End of the shared prelude.
-- ---------------------------------------------------------------------------
