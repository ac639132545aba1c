-- ---- Continuous bucket arithmetic (scripts/src/continuous.lua) ----
-- With a/b = limit / period_us in lowest terms, a level of x stands for x / b
-- units: a cost adds cost * b, the capacity is burst * b, and x drains by a
-- each microsecond, so every quantity is a whole number and every decision
-- exact (3 per second is a = 3, b = 1000000). The capacity is kept at most
-- 2^52, so that a level and a cost add up exactly.
local function out_of_range(limit, period_ms, burst)
  local period_us = period_ms * 1000
  if burst * period_us <= 4503599627370496 then return false end -- b <= period_us: no gcd needed
  local g, h = limit, period_us % limit -- g: their greatest common divisor (none left to find when limit divides period_us)
  while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
  return burst * (period_us / g) > 4503599627370496
end
