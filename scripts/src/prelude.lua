-- ---------------------------------------------------------------------------
-- Shared prelude: argument parsing, validation, exact arithmetic, state I/O and
-- the reply. It is written once in scripts/src/prelude.lua and copied into every
-- script by `go generate`, so each .lua file still stands alone.
-- It must run the same on Redis's Lua 5.1 and on gopher-lua (miniredis): no
-- tonumber() on strings with exponents, no integer division, no string.format
-- of numbers past 2^53, no multiple assignment whose right side reads a
-- variable assigned on its left (gopher-lua assigns left to right).
-- ---------------------------------------------------------------------------
local MAX_LIMITS = 8
local MAX_NUMBER = 1e15
local MAX_PERIOD_MS = 1e12
local EXACT = 9007199254740992 -- 2^53: every integer up to here is exact in a double

local floor, fmod = math.floor, math.fmod
local match, sub, fmt = string.match, string.sub, string.format

local POW10 = { [0] = 1 }
for i = 1, 22 do POW10[i] = POW10[i - 1] * 10 end

-- parse_number reads a contract number: ^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$.
-- It returns value, mantissa, exponent (value = mantissa * 10^exponent, the
-- mantissa an integer without trailing zeros), or nil when s is not a number.
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
  local v
  if exp >= 0 then
    v = exp <= 22 and m * POW10[exp] or math.huge
  elseif exp >= -22 then
    v = m / POW10[-exp]
  else
    v = m / POW10[22] / 10 ^ (-exp - 22)
  end
  return v, m, exp
end

-- scale returns m * 10^e for e >= 0: exact while the result is below 2^53,
-- and past every limit (math.huge) where 10^e is not in the table.
local function scale(m, e)
  if e > 22 then return m == 0 and 0 or math.huge end
  return m * POW10[e]
end

-- Exact integer division for integers 0 <= n, 0 < d, n and d below 2^53.
-- math.fmod is exact; n / d followed by floor is not (it can round up to the
-- next integer), which is the classic off-by-one at rates like 3 per second.
local function idiv(n, d)
  return (n - fmod(n, d)) / d
end

local function cdiv(n, d)
  local r = fmod(n, d)
  if r == 0 then return n / d end
  return (n - r) / d + 1
end

local function gcd(x, y)
  while y ~= 0 do
    local r = fmod(x, y) -- not `x, y = y, fmod(x, y)`: gopher-lua assigns x first
    x = y
    y = r
  end
  return x
end

-- Durations are kept in microseconds; replies round them up to milliseconds.
local function us_to_ms(us)
  if us <= 0 then return 0 end
  if us ~= floor(us) then us = floor(us) + 1 end
  return cdiv(us, 1000)
end

-- num_str formats a stored number so that parse_number reads it back exactly:
-- integers below 2^53 as plain digits, fractions with 17 significant digits.
local function num_str(x)
  return fmt('%.17g', x)
end

local function show(s)
  if #s > 40 then s = sub(s, 1, 40) .. '...' end
  return s
end

local function invalid(name, s, must)
  return fmt("ERR invalid %s '%s': must be %s", name, show(s), must)
end

local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- parse_args validates KEYS and ARGV against the contract before the key is
-- touched. spec.whole: limit, burst and cost must be whole numbers.
-- spec.window: burst may only be absent, 0 or equal to limit.
-- It returns { limits, cost, check }, or nil and an error text.
local function parse_args(spec)
  if #KEYS ~= 1 then
    return nil, fmt("ERR invalid numkeys '%d': must be 1 (the limiter's key)", #KEYS)
  end
  local n_argv = #ARGV
  local n_limits = 1
  if n_argv > 5 then
    local extra = n_argv - 5
    n_limits = 1 + cdiv(extra, 3) -- a partial triple counts as a limit here
    if n_limits > MAX_LIMITS then
      return nil, fmt('ERR too many limits (%d): must be at most %d', n_limits, MAX_LIMITS)
    end
    if extra % 3 ~= 0 then
      return nil, fmt('ERR incomplete limit #%d: each further limit is the triple limit period_ms burst', n_limits)
    end
  end
  local whole = spec.whole and 'a whole number' or 'a number'

  local cost_s = ARGV[4] or ''
  local cost, cost_m, cost_e = 1, 1, 0
  if cost_s ~= '' then
    cost, cost_m, cost_e = parse_number(cost_s)
    if not cost or cost > MAX_NUMBER or (spec.whole and cost_e < 0) then
      return nil, invalid('cost', cost_s, whole .. ' >= 0, at most 1e15')
    end
  end
  local mode = ARGV[5] or ''
  if mode ~= '' and mode ~= 'check' then
    return nil, invalid('mode', mode, "empty or 'check'")
  end

  local limits = {}
  for i = 1, n_limits do
    local base = i == 1 and 0 or 5 + (i - 2) * 3
    local suffix = i == 1 and '' or ' #' .. i
    local limit_s, period_s, burst_s = ARGV[base + 1] or '', ARGV[base + 2] or '', ARGV[base + 3] or ''

    local limit, limit_m, limit_e = parse_number(limit_s)
    if not limit or limit <= 0 or limit > MAX_NUMBER or (spec.whole and limit_e < 0) then
      return nil, invalid('limit' .. suffix, limit_s, 'a positive ' .. (spec.whole and 'whole ' or '') .. 'number, at most 1e15')
    end
    local period, _, period_e = parse_number(period_s)
    if not period or period <= 0 or period > MAX_PERIOD_MS or period_e < 0 then
      return nil, invalid('period_ms' .. suffix, period_s, 'a positive integer, at most 1e12')
    end
    local burst, burst_m, burst_e = limit, limit_m, limit_e
    if burst_s ~= '' then
      local b, bm, be = parse_number(burst_s)
      if spec.window then
        if not b or (b ~= 0 and b ~= limit) then
          return nil, invalid('burst' .. suffix, burst_s, 'empty, 0 or equal to limit for ' .. spec.name)
        end
      elseif not b or b > MAX_NUMBER or (spec.whole and be < 0) then
        return nil, invalid('burst' .. suffix, burst_s, 'a positive number, at most 1e15, or 0 or empty for limit')
      elseif b > 0 then
        burst, burst_m, burst_e = b, bm, be
      end
    end

    -- Units are scaled by 10^decimals of limit and burst so that both are
    -- integers; the rate is then the reduced fraction a/b units per microsecond.
    local decimals = math.max(0, -limit_e, -burst_e)
    if decimals > 15 then
      return nil, invalid('limit' .. suffix, limit_s, 'given with at most 15 decimals (burst too)')
    end
    local unit = POW10[decimals]
    local limit_u = scale(limit_m, limit_e + decimals)
    local burst_u = scale(burst_m, burst_e + decimals)
    if limit_u > EXACT or burst_u > EXACT then
      return nil, invalid('limit' .. suffix, limit_s, 'exact in whole units: limit and burst need fewer significant digits')
    end
    local cost_e_u = cost_e + decimals
    local period_us = period * 1000
    local g = gcd(limit_u, period_us)
    limits[i] = {
      suffix = suffix, limit = limit, period = period, period_us = period_us, burst = burst,
      unit = unit, limit_u = limit_u, burst_u = burst_u,
      cost_u = cost_e_u >= 0 and scale(cost_m, cost_e_u) or cost * unit,
      a = limit_u / g, b = period_us / g,
      limit_s = limit_s, burst_s = burst_s ~= '' and burst_s or limit_s,
    }
  end
  return { limits = limits, cost = cost, cost_s = cost_s, check = mode == 'check' }
end

-- too_large names the argument whose size would push this limit's arithmetic
-- past 2^53, where a double stops being exact.
local function too_large(lim)
  return invalid('burst' .. lim.suffix, lim.burst_s, 'small enough for exact arithmetic with this limit and period_ms (burst * period_ms / limit, in microseconds, at most 2^53)')
end

-- TAGS names every string state layout of the bundle, so that one script can
-- tell another's state from a user's value and say which it is.
local TAGS = { gcra = 'gcra', tb = 'token_bucket', lb = 'leaky_bucket', sw = 'sliding_window', fw = 'fixed_window' }

-- read_state returns the numbers stored under key for this script's tag (an
-- empty table when the key does not exist), or nil and an error text when the
-- key holds anything else. Nothing is written either way.
local function read_state(key, tag, per_limit)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    return nil, fmt('ERR key holds a value of another type, not %s state: left untouched', TAGS[tag])
  end
  if not raw then return {} end
  local found = match(raw, '^(%l+) ')
  if found ~= tag then
    if found and TAGS[found] then
      return nil, fmt('ERR key holds %s state, not %s state: left untouched', TAGS[found], TAGS[tag])
    end
    return nil, fmt('ERR key holds a value that is not %s state: left untouched', TAGS[tag])
  end
  local fields = {}
  for word in string.gmatch(sub(raw, #tag + 2), '[^ ]+') do
    local v = parse_number(word)
    if not v then
      return nil, fmt('ERR key holds a value that is not %s state: left untouched', TAGS[tag])
    end
    fields[#fields + 1] = v
  end
  if #fields == 0 or #fields % per_limit ~= 0 then
    return nil, fmt('ERR key holds a value that is not %s state: left untouched', TAGS[tag])
  end
  return fields
end

-- write_state stores the fields with a TTL of ttl_us rounded up to whole ms, so
-- the key disappears once its state is worth no more than no state at all.
local function write_state(key, tag, fields, ttl_us)
  local parts = { tag }
  for i = 1, #fields do parts[i + 1] = num_str(fields[i]) end
  redis.call('SET', key, table.concat(parts, ' '), 'PX', us_to_ms(ttl_us))
end

-- Each algorithm evaluates every limit to a verdict:
--   ok          the cost fits this limit now
--   never       the cost can never fit (more than the capacity)
--   retry_us    when not ok and not never: wait before the same cost fits
--   rem, left   whole units available (reply) and the exact amount (ranking),
--               after this request when ok, now when not
--   reset_us    time until this limit is back to its empty state, likewise
--   capacity    the capacity to report
-- decide combines them: all or nothing, and the binding limit for the reply.
local function decide(verdicts)
  local allowed = true
  for i = 1, #verdicts do
    if not verdicts[i].ok then allowed = false end
  end
  local pick = nil
  for i = 1, #verdicts do
    local v = verdicts[i]
    if allowed then
      if not pick or v.left < verdicts[pick].left then pick = i end
    elseif not v.ok then
      if not pick then
        pick = i
      else
        local p = verdicts[pick]
        if not p.never and (v.never or v.retry_us > p.retry_us) then pick = i end
      end
    end
  end
  local v = verdicts[pick]
  local retry_ms = 0
  if not allowed then retry_ms = v.never and -1 or us_to_ms(v.retry_us) end
  -- When denied, the binding limit describes the state now (nothing was taken);
  -- the fields of the other limits must also be now, which they are.
  return allowed, { allowed and 1 or 0, v.rem, retry_ms, us_to_ms(v.reset_us), floor(v.capacity), pick }
end

local function ttl_of(verdicts)
  local ttl = 0
  for i = 1, #verdicts do
    if verdicts[i].reset_us > ttl then ttl = verdicts[i].reset_us end
  end
  return ttl
end
-- ---------------------------------------------------------------------------
-- End of the shared prelude.
-- ---------------------------------------------------------------------------
