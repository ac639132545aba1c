-- Algorithm: fixed window (time bucketed). A window of period_ms starts with
-- the first admitted request and allows limit units; when it ends the count
-- starts over. The cheapest to reason about; allows up to 2 * limit across a
-- window boundary.
-- State: a string "fw start count ..." per limit, start in microseconds
-- (in hexadecimal).
local NAME = 'fixed_window'
local TAG = 'fw' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = true -- limit, burst and cost must be whole numbers
local WINDOW = true -- burst may only be absent, 0 or equal to limit
--@include prelude.lua
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local start, count = state[2 * i - 1], state[2 * i]
  if not start or now >= start + lim.period_us then
    start, count = now, 0 -- a new window opens with this request
  end
  local ok, never, retry_us = false, false, 0
  if cost > lim.limit then
    never = true
  elseif count + cost <= lim.limit then
    ok = true
    count = count + cost
  else
    retry_us = start + lim.period_us - now
  end
  local rem = count < lim.limit and lim.limit - count or 0
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.limit,
    rem = rem, left = rem, reset_us = count > 0 and start + lim.period_us - now or 0,
  }
  fields[2 * i - 1] = start
  fields[2 * i] = count
end
--@include decide.lua
--@include write.lua
