-- Algorithm: sliding window counter. Windows of period_ms are aligned to
-- multiples of period_ms since the Unix epoch; a request is admitted when the
-- current window's count plus the previous window's count, weighted by how
-- much of it still overlaps the sliding window, leaves room for its cost.
-- Close to a true sliding window at the cost of two counters.
-- State: a string "sw start previous current ..." per limit, start the current
-- window's start in milliseconds since the epoch, the counts in whole steps of
-- 1/S (S = 10^(decimals of limit + up to 6)); integers in hexadecimal.
local NAME = 'sliding_window'
local TAG = 'sw' -- the state's tag
local PER_LIMIT = 3 -- numbers stored per limit
local WHOLE = false -- limit, burst and cost must be whole numbers
local WINDOW = true -- burst may only be absent, 0 or equal to limit
--@include prelude.lua

for i = 1, n_limits do
  -- the weighted count, scaled by period_ms, must stay exact
  local lim = limits[i]
  lim.magnitude = 3 * lim.limit_u * lim.period
  if lim.magnitude > EXACT then
    return redis.error_reply(invalid('limit' .. lim.suffix, lim.limit_s, 'small enough for exact arithmetic with this period_ms (3 * limit * period_ms, in units of its last decimal, at most 2^53)'))
  end
end

--@include steps.lua
for i = 1, n_limits do
  limits[i].N = limits[i].limit_u * limits[i].c_pow -- the limit, in steps
end
--@include state.lua

-- ---- Algorithm ----
-- Whole milliseconds, rounded down: the previous window then weighs a little
-- more, never less, so the estimate errs against the caller.
local now_ms = idiv(now, 1000)
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local p, N = lim.period, lim.N
  local C = steps(cost_m, cost_e, lim.step_k)
  local start = now_ms - fmod(now_ms, p)
  local stored, prev, cur = state[3 * i - 2], 0, 0
  if stored == start then
    prev, cur = state[3 * i - 1], state[3 * i]
  elseif stored == start - p then
    prev = state[3 * i]
  end
  local into = now_ms - start
  -- used is the weighted count times p: prev * (p - into) / p + cur
  local used = prev * (p - into) + cur * p
  local ok, never, retry_us = false, false, 0
  if C > N then
    never = true
  elseif used + C * p <= N * p then
    ok = true
    cur = cur + C
    used = used + C * p
  else
    local target_ms
    local room = N - C - cur
    if room >= 0 then
      -- later in this window, once the previous window weighs little enough
      target_ms = start + p - idiv(room * p, prev)
    else
      -- in the next window, where this window's count is the previous one
      local later = p - idiv((N - C) * p, cur)
      target_ms = start + p + (later > 0 and later or 0)
    end
    retry_us = target_ms * 1000 - now
  end
  local room = N * p - used
  if room < 0 then room = 0 end
  local reset_us = 0
  if cur > 0 then
    reset_us = (start + 2 * p) * 1000 - now
  elseif prev > 0 then
    reset_us = (start + p) * 1000 - now
  end
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.limit,
    rem = idiv(room, p * lim.S), left = room / (p * lim.S), reset_us = reset_us,
  }
  fields[3 * i - 2] = start
  fields[3 * i - 1] = prev
  fields[3 * i] = cur
end
--@include decide.lua
--@include write.lua
