-- ---- Continuous bucket (scripts/src/continuous.lua), for gcra and leaky_bucket ----
-- A limit drains a/b units per microsecond. Its level is kept as the integer
-- x = level * b: a cost adds cost * b, the capacity is burst * b, and x drains
-- by a each microsecond, so every quantity is an integer and every decision
-- exact. The two algorithms differ only in how they store x.
-- The capacity is kept at most 2^52, so that a level and a cost that each fit
-- it add up exactly; a cost above the capacity never needs adding at all.
for i = 1, n_limits do
  local lim = limits[i]
  lim.xmax = lim.burst_u * lim.b
  if lim.xmax > EXACT / 2 then return too_large(lim, '2^52') end
  if cost <= lim.burst then
    local cx = lim.cost_u * lim.b
    if cx ~= floor(cx) then cx = floor(cx) + 1 end -- a cost finer than the limit's units: round against the caller
    lim.cx = cx
  else
    lim.cx = math.huge -- never fits
  end
end

-- continuous_verdict judges a limit whose level is x now; x_after is the level
-- to store if the whole request is admitted.
local function continuous_verdict(lim, x)
  local ok, never, retry_us = false, false, 0
  if lim.cx > lim.xmax then
    never = true
  elseif x + lim.cx <= lim.xmax then
    ok = true
    x = x + lim.cx
  else
    retry_us = cdiv(x + lim.cx - lim.xmax, lim.a)
  end
  local room = lim.xmax > x and lim.xmax - x or 0 -- state written under other limits may overflow
  return {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.burst, x_after = x,
    rem = idiv(idiv(room, lim.b), lim.unit), left = room / (lim.b * lim.unit), reset_us = cdiv(x, lim.a),
  }
end
