-- ---- Decimal steps (scripts/src/steps.lua), for token_bucket and sliding_window ----
-- Counted amounts are kept in whole steps of 1/S units, S = unit * 10^c: the
-- limit's own decimals plus up to 6 more, fewer where lim.magnitude (the
-- largest amount the algorithm adds up, in units) would pass 2^53. Costs like
-- 0.1 + 0.2 then add up exactly; a cost finer than a step is rounded up,
-- against the caller.
for i = 1, n_limits do
  local lim = limits[i]
  local k = 0 -- decimals of the unit
  local u = lim.unit
  while u > 1 do
    u = u / 10
    k = k + 1
  end
  local c = 6
  while c > 0 and lim.magnitude * 10 ^ c > EXACT do c = c - 1 end
  lim.step_k, lim.S, lim.c_pow = k + c, lim.unit * 10 ^ c, 10 ^ c
end

-- steps returns a parsed number m * 10^e (units) in steps of 10^-k units.
local function steps(m, e, k)
  if m == 0 then return 0 end
  local x = e + k
  if x >= 0 then return x > 22 and math.huge or m * 10 ^ x end
  if x < -22 then return 1 end -- a positive amount below one step
  return cdiv(m, 10 ^ -x)
end
