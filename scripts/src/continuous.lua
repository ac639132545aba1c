-- ---- The level's range and its exact arithmetic (scripts/src/continuous.lua) ----
-- out_of_range names the argument at fault in a combination the script
-- refuses, or nil: every limit and burst up to 10^12 with a period_ms up to
-- 366 days whose full drain, burst * period_ms / limit, is at most 10^12 ms
-- is accepted, and so is every call whose level of twice the capacity,
-- 2 * burst * period_us, stays within 2^53 (level.lua's cheap case). (Only
-- run past the first check in args.lua.)
local function out_of_range(limit, period_ms, burst)
  if 2 * burst * period_ms * 1000 <= 9007199254740992 then return nil end -- (a multiple of 2000: exact to 2^54)
  if period_ms > 31622400000 then return 'period_ms' end
  if burst > limit and less(1e12, period_ms, burst, limit) then return 'burst' end -- 10^12 < burst * period_ms / limit, exactly
  return nil
end
