-- ---- The level's range (scripts/src/continuous.lua) ----
-- A level is at most twice the capacity, burst * period_us, and stays a
-- whole number below 2^53 (level.lua).
local function out_of_range(limit, period_ms, burst)
  return burst * period_ms * 2000 > 9007199254740992
end
