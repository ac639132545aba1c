--! id: 0
--! go: GCRA
--! name: gcra
--! tag: gcra:2
--! fields: 2
--! window: false
--! time_field: 0
--! time_unit: us
--! range: continuous
--! max_limit: 1000000000000000
--! summary: Generic Cell Rate Algorithm: a theoretical arrival time per limit; smooth and exact
-- Algorithm: GCRA, the Generic Cell Rate Algorithm. Units are spaced
-- period_ms / limit apart on a theoretical arrival time (TAT); a request is
-- admitted when its cost fits before the TAT runs more than burst units ahead
-- of now. It decides exactly as leaky_bucket.lua does, with less state.
-- State: "gcra:2 t r" for each limit: TAT = t + r / a microseconds, 0 <= r < a.
-- Never more admitted in any span of t ms than burst + limit * t / period_ms.
--@include continuous.lua
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
for i = 1, n do
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, burst, stored_t, stored_r = limit1, period1 * 1000, burst1, s1, s2
  if i > 1 then
    limit, period_us, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    stored_t, stored_r = more[2 * i - 3], more[2 * i - 2]
  end
  local g, h = limit, period_us -- g: their greatest common divisor
  while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
  local a, b = limit / g, period_us / g
  local xmax = burst * b
  -- The TAT, t + r/a, or now when it has passed (an empty bucket).
  local t, r = now, 0
  if stored_r then
    local r0 = stored_r % a -- state of other limits is read in these terms
    local t0 = stored_t + (stored_r - r0) / a
    if t0 > now or (t0 == now and r0 > 0) then t, r = t0, r0 end
  end
  -- The level now is x = (t - now) * a + r; x + cost * b must fit in xmax.
  -- Waits are written without that product, which a clock that stepped back
  -- could push past 2^53; they are then longer by the step (guarantee 9).
  local ok, never, retry_us = false, cost > burst, 0
  if not never then
    local over = r + cost * b - xmax -- the level past the capacity, in 1/b units
    retry_us = t - now + (over + -over % a) / a
    ok = retry_us <= 0 or cost == 0
  end
  if ok then -- the TAT moves on by the cost
    local y = r + cost * b
    r = y % a
    t = t + (y - r) / a
  end
  local ahead = t - now
  local room = 0
  if ahead <= xmax / a then
    room = xmax - ahead * a - r
    if room < 0 then room = 0 end
  end
  local rem, left, per, cap = (room - room % b) / b, room, b, burst -- units left: left / per
  local reset_us = ahead + (r > 0 and 1 or 0)
--@include verdict.lua
  if allowed and writes then out = fmt('%s %d %d', out, t, r) end
end
--@include write.lua
--@include reply.lua
