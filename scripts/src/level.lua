-- ---- The level (scripts/src/level.lua): gcra's and leaky_bucket's decision ----
-- A level of x stands for x / period_us units: a unit is period_us of x, x
-- drains by limit each microsecond, and no limit or burst changes what it
-- means, so raised limits read the same level and only admit more
-- (guarantee 12). The capacity is burst * period_us; a state is read as at
-- most twice it (the debt force may leave), as of its time, so no wait
-- passes twice the time these limits take to drain their capacity. While
-- twice the capacity stays below 2^53 (and the state within it), x is exact
-- in a double and decided here; past it deep.lua decides, and x may be the
-- text of a level past 2^53 (state.lua).
--@fast begin
--@if general
for i = 1, n do
--@end
  -- This limit's arguments and its state, x at time t (nil: none): the
  -- first limit's in locals, the others' in argv (as numbers by now) and in
  -- more.
  local limit, b, burst, x, t = limit1, period1 * 1000, burst1, s1, s2
--@if general
  if i > 1 then
--@include keyed.lua
    limit, b, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    x, t = more[2 * i - 1], more[2 * i]
  end
--@end
  local xmax, text = burst * b -- text: the level to write, past 2^53 (deep.lua's)
  if not t then x, t = 0, now end
  local ok, never, retry_us, units = false, cost > burst, 0, 0
  local rem, frac, reset_us -- (one LOADNIL: set by both paths below)
  if xmax > 4503599627370496 or x ~= x + 0 or x > 2 * xmax then -- past 2^53 (x ~= x + 0: its text), or a state past twice the capacity
    if b < 140737488355328 or xmax > 4503599627370496 then
--@if fast
      -- (A script defines deep.lua's functions here, where only the calls
      -- past 2^53 make their closures; the library has them already.)
--@scriptonly begin
--@include exact.lua
--@include deep.lua
--@scriptonly end
--@end
      ok, retry_us, units, rem, frac, reset_us, text, t = deep(x, t, now, limit, b, burst, cost, settle and mode)
    else
      x = 2 * xmax -- (a period past 4 years, past exact.lua's bound on b: read at most twice the capacity)
    end
  end
  if not text then
    -- Drained to now. A clock behind t (it stepped back) decides as of t,
    -- and its waits are longer by t - now (guarantee 9).
    if now > t then
      local drained = (now - t) * limit -- (past 2^53 only when it is past x)
      if drained >= x then x = 0 else x = x - drained end
      t = now
    end
    if not never then
      local over = x - (xmax - cost * b) -- x + cost * b - xmax, without the sum, which could pass 2^53
      if over <= 0 or cost == 0 then ok = true else retry_us = t - now + (over + -over % limit) / limit end
    end
    if settle then
      if mode == 'refund' then -- up to cost units back, never below empty; a unit partly drained counts as one
        local give = x
        if cost <= 2 * burst and cost * b < x then give = cost * b end
        units, x = (give + -give % b) / b, x - give
      else -- force: cost units, as far as twice the capacity
        local room = 2 * xmax - x
        units = (room - room % b) / b
        if cost < units then units = cost end
        x = x + units * b
      end
      local over = x - (xmax - b) -- the wait for one unit, after
      retry_us = over > 0 and t - now + (over + -over % limit) / limit or 0
    elseif ok then
      x, units = x + cost * b, cost
    end
    local room = xmax - x
    if room < 0 then room = 0 end
    frac = room % b
    rem = (room - frac) / b -- units left: rem + frac / b
    reset_us = x > 0 and t - now + (x + -x % limit) / limit or 0
  end
  local cap, per = burst, b
--@if general
--@include verdict.lua
  if allowed and writes then out = out .. (text and ' ' .. text .. fmt(' %d', t) or fmt(' %d %d', x, t)) end
end
--@else
  local allowed, out = ok
  if (ok or settle) and writes then
    if text then out = '@TAG@ ' .. text .. fmt(' %d', t) else out = fmt('@TAG@ %d %d', x, t) end
  end
--@end
--@fast end
