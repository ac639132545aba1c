-- Algorithm: token bucket with discrete refills. The bucket starts full with
-- burst tokens; limit tokens are added every period_ms, counted from the call
-- that created the state, up to burst. A request is admitted when the bucket
-- holds its cost. Simple to explain; a refill arrives all at once.
-- State: a string "tb tokens t ..." per limit, t the time of the last refill
-- in microseconds (integers in hexadecimal, fractions in decimal).
local NAME = 'token_bucket'
local TAG = 'tb' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = false -- limit, burst and cost must be whole numbers
local WINDOW = false -- burst may only be absent, 0 or equal to limit
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
end
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local tokens, last = state[2 * i - 1], state[2 * i]
  if not tokens then
    tokens, last = lim.burst, now
  elseif now > last then
    local refills = idiv(now - last, lim.period_us)
    if refills > 0 then
      tokens = tokens + refills * lim.limit
      last = last + refills * lim.period_us
    end
  end
  if tokens > lim.burst then tokens = lim.burst end

  local ok, never, retry_us = false, false, 0
  if cost > lim.burst then
    never = true
  elseif cost <= tokens then
    ok = true
    tokens = tokens - cost
  else
    retry_us = last + ceil_ratio(cost - tokens, lim.limit) * lim.period_us - now
  end
  local reset_us = 0
  if tokens < lim.burst then
    reset_us = last + ceil_ratio(lim.burst - tokens, lim.limit) * lim.period_us - now
  end
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.burst,
    rem = floor(tokens), left = tokens, reset_us = reset_us,
  }
  fields[2 * i - 1] = tokens
  fields[2 * i] = last
end
--@include decide.lua
--@include write.lua
