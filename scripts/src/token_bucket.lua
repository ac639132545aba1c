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
