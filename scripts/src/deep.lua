-- ---- The level past 2^53 (scripts/src/deep.lua) ----
-- In the accepted range a level x reaches 6.4 * 10^25 (twice 10^12 units
-- of 366 days): here it is split into u whole units and p parts of a unit,
-- x = u * period_us + p with 0 <= p < period_us, each below 2^53, as is
-- every time and every wait; each product of two of them goes through
-- muldiv (exact.lua). The state keeps x as its decimal text.
-- ceil_div is ceil((k * b + f) / d), for whole k, f >= 0 and d >= 1.
local function ceil_div(k, b, f, d)
  local q, r = muldiv(k, b, d)
  r = r + f
  local s = r % d
  return q + (r - s) / d + (s > 0 and 1 or 0)
end
-- drain is the level u, p after e microseconds at limit per microsecond.
local function drain(u, p, e, limit, b)
  local x, d = u * b + p, e * limit -- (in doubles, each within 2^-52 of the exact: apart by more, they decide)
  if d > x * 1.000000000001 then return 0, 0 end
  if d > x * 0.999999999999 and x / limit < 9007199254740992 and e >= ceil_div(u, b, p, limit) then return 0, 0 end -- (else it takes longer than any e)
  local q, r = muldiv(e, limit, b) -- below x / b: below u + 1
  u = u - q
  p = p - r
  if p < 0 then
    p = p + b
    u = u - 1
  end
  return u, p
end
-- split is x (a number below 2^53, or the text of a larger one, state.lua)
-- as u, p for a period of b microseconds: the text's last 14 digits and the
-- rest, hi * 10^14 + lo, divided by b (hi has no leading zero: state.lua).
local function split(x, b)
  if x == x + 0 then
    local p = x % b
    return (x - p) / b, p
  end
  local hi, lo = ('').sub(x, 1, #x - 14) + 0, ('1' .. ('').sub(x, -14)) - 1e14 -- (a 1 before the zeros the last 14 may start with: gopher-lua reads 010 as octal)
  if hi >= b then return 17592186044417, 0 end -- past 10^14 units: more than any limit writes
  local q, r = muldiv(hi, 1e14, b)
  r = r + lo
  local p = r % b
  return q + (r - p) / b, p
end
-- decimal is the level u * b + p as a decimal number: in base 10^7, from
-- products of 7-digit halves, each below 2^53.
local function decimal(u, p, b)
  local x = u * b + p
  if x < 9007199254740992 then return fmt('%d', x) end -- exact
  local ul, bl = u % 1e7, b % 1e7
  local uh, bh = (u - ul) / 1e7, (b - bl) / 1e7
  local s0 = ul * bl + p
  local c0 = s0 % 1e7
  local s1 = uh * bl + ul * bh + (s0 - c0) / 1e7
  local c1 = s1 % 1e7
  return fmt('%d%07d%07d', uh * bh + (s1 - c1) / 1e7, c1, c0)
end
-- deep is level.lua's decision for one limit on the level x at time t, for
-- any level and any limit of the range; mode is refund, force or false.
-- The state's level, drained, is what refund and force change by their
-- units, so that no forgiveness is written back (guarantee 12); the read
-- is that level at most twice the capacity as of t, drained; an admission
-- records on the read. It returns what level.lua sets: ok, retry_us,
-- units, rem and frac (the units left: rem + frac / b), reset_us, and the
-- level to write, as text, and its time.
local function deep(x, t, now, limit, b, burst, cost, mode)
  local u, p = split(x, b)
  if u > 17592186044416 then -- 2^44 units: past anything a limit writes
    u = 17592186044416
    p = 0
  end
  local top = 2 * burst
  local cu, cp = u, p -- the read
  if cu > top or cu == top and cp > 0 then
    cu = top
    cp = 0
  end
  if now > t then
    local same = cu == u and cp == p -- (the read is the state's level: one drain for both)
    u, p = drain(u, p, now - t, limit, b)
    if same then cu, cp = u, p else cu, cp = drain(cu, cp, now - t, limit, b) end
    t = now
  end
  local k = cu + cost - burst -- the units past the capacity a call of cost would leave (and cp / b more)
  local ok, units, retry_us = cost == 0 or k < 0 or k == 0 and cp == 0, 0, 0
  if mode then
    if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
      if cost > u or cost == u and p == 0 then
        units = u + (p > 0 and 1 or 0)
        u = 0
        p = 0
      else
        units = cost
        u = u - cost
      end
    else -- force: cost units, as far as twice the capacity
      units = top - u - (p > 0 and 1 or 0)
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      u = u + units
    end
    cu, cp = u, p -- what the next call reads
    if cu > top or cu == top and cp > 0 then
      cu = top
      cp = 0
    end
    k = cu + 1 - burst -- the wait for one unit, after
    if k > 0 or k == 0 and cp > 0 then retry_us = t - now + ceil_div(k, b, cp, limit) end
  else
    if ok then
      cu = cu + cost
      units = cost
    elseif cost <= burst then
      retry_us = t - now + ceil_div(k, b, cp, limit)
    end
    u, p = cu, cp
  end
  local rem, frac, reset_us = burst - cu, 0, 0
  if cp > 0 then
    rem = rem - 1
    frac = b - cp
  end
  if rem < 0 then
    rem = 0
    frac = 0
  end
  if cu > 0 or cp > 0 then reset_us = t - now + ceil_div(cu, b, cp, limit) end
  return ok, retry_us, units, rem, frac, reset_us, decimal(u, p, b), t
end
