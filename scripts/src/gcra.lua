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
--@include fastcontinuous.lua
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
