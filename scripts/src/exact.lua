-- ---- Exact products past 2^53 (scripts/src/exact.lua) ----
-- Lua's numbers are doubles, exact only below 2^53. Where a product of the
-- accepted range passes it (a level of a billion units a month in units of
-- 1/period_us, a window's count weighted by microseconds), muldiv gives
-- floor(a * m / c) and a * m % c exactly, for whole a, m >= 0 below 2^53 and
-- c from 1 below 2^47 whose quotient is below 2^53: the quotient estimated
-- in doubles (off by at most 3), the remainder a * m - q * c computed
-- exactly modulo 2^50 (low: the product's low bits from 25-bit halves,
-- every partial product below 2^53), where it lies within 4c < 2^49 of 0,
-- then q corrected. Only calls whose products may pass 2^53 run it.
local function low(a, m) -- a * m % 2^50
  local a0, m0 = a % 33554432, m % 33554432
  local a1, m1 = (a - a0) / 33554432, (m - m0) / 33554432
  local mid = (a1 * m0 % 33554432 + a0 * m1 % 33554432) % 33554432
  return (mid * 33554432 + a0 * m0) % 1125899906842624
end
local function muldiv(a, m, c)
  local x = a * m
  if x < 9007199254740992 then -- exact already
    local r = x % c
    return (x - r) / c, r
  end
  local q = x / c
  q = q - q % 1
  local r = (low(a, m) - low(q, c)) % 1125899906842624
  if r >= 562949953421312 then r = r - 1125899906842624 end
  while r < 0 do
    q = q - 1
    r = r + c
  end
  while r >= c do
    q = q + 1
    r = r - c
  end
  return q, r
end
