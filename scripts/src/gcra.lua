-- Algorithm: GCRA, the Generic Cell Rate Algorithm. Each unit has a theoretical
-- arrival time (TAT) spaced period_ms / limit apart; a request is admitted when
-- its cost fits before TAT runs more than burst units ahead of now. Smooth,
-- exact, and the cheapest state: one rational number per limit.
-- State: a string "gcra t r ..." per limit, TAT = t + r/a microseconds
-- (integers in hexadecimal).
local NAME = 'gcra'
local TAG = 'gcra' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = false -- limit, burst and cost must be whole numbers
local WINDOW = false -- burst may only be absent, 0 or equal to limit
--@include fastargs.lua
if fast_limit then
  local m, fmod = string.match, math.fmod
  local limit, period, burst, cost, ms = fast_limit, fast_period, fast_burst, fast_cost, fast_mode
  local period_us = period * 1000
  local g, y = limit, period_us
  while y ~= 0 do
    local r = fmod(g, y)
    g = y
    y = r
  end
  local a, b = limit / g, period_us / g
  local xmax = burst * b
  if xmax <= 4503599627370496 then -- 2^52; past it the full script words the error
    local key = KEYS[1]
    local raw = redis.pcall('GET', key)
    local t, r
    if type(raw) == 'string' then
      local ts, rs = m(raw, '^gcra (%x+) (%x+)$')
      if ts then t, r = tonumber(ts, 16), tonumber(rs, 16) end
    end
    if raw == false or t then
      local tm = redis.call('TIME')
      local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
      local x = 0
      if t then
        x = (t - now) * a + r
        if x < 0 then x = 0 end
      end
      local ok, retry_ms = false, 0
      if cost > burst then
        retry_ms = -1
      elseif x + cost * b <= xmax then
        ok = true
        x = x + cost * b
      else
        local d = x + cost * b - xmax
        local q = fmod(d, a)
        local retry_us = q == 0 and d / a or (d - q) / a + 1
        q = fmod(retry_us, 1000)
        retry_ms = q == 0 and retry_us / 1000 or (retry_us - q) / 1000 + 1
      end
      local room = xmax > x and xmax - x or 0
      local q = fmod(x, a)
      local reset_us = q == 0 and x / a or (x - q) / a + 1
      q = fmod(reset_us, 1000)
      local reset_ms = q == 0 and reset_us / 1000 or (reset_us - q) / 1000 + 1
      if ok and cost > 0 and ms == '' then
        local ahead = (x - fmod(x, a)) / a
        redis.call('SET', key, string.format('gcra %x %x', now + ahead, x - ahead * a), 'PX', string.format('%d', reset_ms))
      end
      return { ok and 1 or 0, (room - fmod(room, b)) / b, retry_ms, reset_ms, burst, 1 }
    end
  end
end
--@include prelude.lua
--@include continuous.lua
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local t, r = state[2 * i - 1], state[2 * i]
  local x = t and (t - now) * lim.a + r or 0 -- the level, from TAT - now
  if x < 0 then x = 0 end
  local v = continuous_verdict(lim, x)
  verdicts[i] = v
  local ahead = idiv(v.x_after, lim.a)
  fields[2 * i - 1] = now + ahead
  fields[2 * i] = v.x_after - ahead * lim.a
end
--@include decide.lua
--@include write.lua
