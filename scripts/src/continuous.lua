-- ---------------------------------------------------------------------------
-- Continuous bucket core, shared by gcra.lua and leaky_bucket.lua (written once
-- in scripts/src/continuous.lua): the two differ only in how they store it.
--
-- A limit drains a/b units per microsecond (the reduced fraction of limit
-- units per period). The level is kept as the integer x = level * b, so a cost
-- adds cost * b, the capacity is burst * b, and x drains by a each microsecond:
-- every quantity is an integer and every decision exact.
-- ---------------------------------------------------------------------------

-- continuous_setup fixes each limit's capacity and cost in x units, or returns
-- an error text when they would not be exact.
local function continuous_setup(args)
  for _, lim in ipairs(args.limits) do
    lim.xmax = lim.burst_u * lim.b
    local cx = lim.cost_u * lim.b
    if cx ~= floor(cx) then cx = floor(cx) + 1 end -- a finer cost than the limit's units: round against the caller
    lim.cx = cx
    if lim.xmax > EXACT then return too_large(lim) end
    if cx > EXACT - lim.xmax then return invalid('cost', args.cost_s, 'small enough for exact arithmetic with this limit (cost * period_ms / limit, in microseconds, at most 2^53)') end
  end
end

-- continuous_verdict judges one limit whose level is x now; x_after is the
-- level to store when the whole request is admitted.
local function continuous_verdict(lim, x)
  local v = { capacity = lim.burst, ok = false, never = false, retry_us = 0 }
  if lim.cx > lim.xmax then
    v.never = true
  elseif x + lim.cx <= lim.xmax then
    v.ok = true
    x = x + lim.cx
  else
    v.retry_us = cdiv(x + lim.cx - lim.xmax, lim.a)
  end
  v.x_after = x
  local room = lim.xmax > x and lim.xmax - x or 0 -- state written under other limits may overflow
  v.rem = idiv(idiv(room, lim.b), lim.unit)
  v.left = room / (lim.b * lim.unit)
  v.reset_us = cdiv(x, lim.a)
  return v
end
