-- Algorithm: leaky bucket as a meter. Each request pours its cost into a
-- bucket of capacity burst that leaks continuously at limit per period_ms; a
-- request is admitted when it fits. Makes the same decisions as GCRA (both are
-- continuous buckets) but keeps the level itself, readable as a meter.
-- State: a string "lb x t ..." per limit, level = x / b units at time t
-- microseconds, where a/b is limit per microsecond in lowest terms (integers
-- in hexadecimal).
local NAME = 'leaky_bucket'
local TAG = 'lb' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = false -- limit, burst and cost must be whole numbers
local WINDOW = false -- burst may only be absent, 0 or equal to limit
--@include fastargs.lua
--@include fastcontinuous.lua
--@include prelude.lua
--@include continuous.lua
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local x, t = state[2 * i - 1], state[2 * i]
  if x then
    local drained = now > t and (now - t) * lim.a or 0
    x = x > drained and x - drained or 0
  else
    x = 0
  end
  local v = continuous_verdict(lim, x)
  verdicts[i] = v
  fields[2 * i - 1] = v.x_after
  fields[2 * i] = now
end
--@include decide.lua
--@include write.lua
