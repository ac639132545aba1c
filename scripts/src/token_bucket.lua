-- Algorithm: token bucket with discrete refills. The bucket starts full with
-- burst tokens; limit tokens are added every period_ms, counted from the call
-- that created the state, up to burst. A request is admitted when the bucket
-- holds its cost. Simple to explain; a refill arrives all at once.
-- State: a string "tb tokens t ..." per limit: tokens in whole steps of 1/S
-- (S = 10^(decimals of limit and burst + up to 6)), t the time of the last
-- refill in microseconds, both integers in hexadecimal.
local NAME = 'token_bucket'
local TAG = 'tb' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = false -- limit, burst and cost must be whole numbers
local WINDOW = false -- burst may only be absent, 0 or equal to limit
--@include fastargs.lua
if fast_limit then
  local m, fmod = string.match, math.fmod
  local limit, period, burst, cost, ms = fast_limit, fast_period, fast_burst, fast_cost, fast_mode
  local period_us = period * 1000
  local q = fmod(burst, limit)
  local fills = q == 0 and burst / limit or (burst - q) / limit + 1
  if fills * period_us <= 9007199254740992 then -- past 2^53 the full script words the error
    local c = 6 -- steps per unit: 10^c, as many as stay exact
    while c > 0 and 2 * burst * 10 ^ c > 9007199254740992 do c = c - 1 end
    local S = 10 ^ c
    local L, B, C = limit * S, burst * S, cost * S
    local key = KEYS[1]
    local raw = redis.pcall('GET', key)
    local tokens, last
    if type(raw) == 'string' then
      local ts, ls2 = m(raw, '^tb (%x+) (%x+)$')
      if ts then tokens, last = tonumber(ts, 16), tonumber(ls2, 16) end
    end
    if raw == false or tokens then
      local tm = redis.call('TIME')
      local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
      if not tokens then
        tokens, last = B, now
      elseif now > last then
        local r = fmod(now - last, period_us)
        local refills = (now - last - r) / period_us
        if refills > 0 then
          last = last + refills * period_us
          local need = B - tokens
          q = fmod(need, L)
          if tokens >= B or refills >= (q == 0 and need / L or (need - q) / L + 1) then tokens = B else tokens = tokens + refills * L end
        end
      end
      if tokens > B then tokens = B end
      local ok, retry_ms = false, 0
      if C > B then
        retry_ms = -1
      elseif C <= tokens then
        ok = true
        tokens = tokens - C
      else
        local need = C - tokens
        q = fmod(need, L)
        local retry_us = last + (q == 0 and need / L or (need - q) / L + 1) * period_us - now
        if retry_us > 0 then
          q = fmod(retry_us, 1000)
          retry_ms = q == 0 and retry_us / 1000 or (retry_us - q) / 1000 + 1
        end
      end
      local reset_ms = 0
      if tokens < B then
        local need = B - tokens
        q = fmod(need, L)
        local reset_us = last + (q == 0 and need / L or (need - q) / L + 1) * period_us - now
        if reset_us > 0 then
          q = fmod(reset_us, 1000)
          reset_ms = q == 0 and reset_us / 1000 or (reset_us - q) / 1000 + 1
        end
      end
      if ok and cost > 0 and ms == '' then
        redis.call('SET', key, string.format('tb %x %x', tokens, last), 'PX', string.format('%d', reset_ms))
      end
      return { ok and 1 or 0, (tokens - fmod(tokens, S)) / S, retry_ms, reset_ms, burst, 1 }
    end
  end
end
--@include prelude.lua

-- ceil_ratio is exact for integers and rounds as well as floats can otherwise.
local function ceil_ratio(n, d)
  if n == floor(n) and d == floor(d) then return cdiv(n, d) end
  return math.ceil(n / d)
end
for i = 1, n_limits do
  -- the longest wait a limit can report: refills until an empty bucket is full
  local lim = limits[i]
  if ceil_ratio(lim.burst, lim.limit) * lim.period_us > EXACT then return too_large(lim, '2^53') end
  lim.magnitude = 2 * lim.burst_u -- tokens plus a cost
end

--@include steps.lua
for i = 1, n_limits do
  local lim = limits[i]
  lim.L = lim.limit_u * lim.c_pow -- a refill, in steps
  lim.B = lim.burst_u * lim.c_pow -- the capacity, in steps
end
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local L, B = lim.L, lim.B
  local C = steps(cost_m, cost_e, lim.step_k)
  local tokens, last = state[2 * i - 1], state[2 * i]
  if not tokens then
    tokens, last = B, now
  else
    if tokens ~= floor(tokens) then tokens = floor(tokens) end -- a state of other limits, in its own terms
    if now > last then
      local refills = idiv(now - last, lim.period_us)
      if refills > 0 then
        last = last + refills * lim.period_us
        if tokens >= B or refills >= cdiv(B - tokens, L) then tokens = B else tokens = tokens + refills * L end
      end
    end
  end
  if tokens > B then tokens = B end

  local ok, never, retry_us = false, false, 0
  if C > B then
    never = true
  elseif C <= tokens then
    ok = true
    tokens = tokens - C
  else
    retry_us = last + cdiv(C - tokens, L) * lim.period_us - now
  end
  local reset_us = 0
  if tokens < B then
    reset_us = last + cdiv(B - tokens, L) * lim.period_us - now
  end
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.burst,
    rem = idiv(tokens, lim.S), left = tokens / lim.S, reset_us = reset_us,
  }
  fields[2 * i - 1] = tokens
  fields[2 * i] = last
end
--@include decide.lua
--@include write.lua
