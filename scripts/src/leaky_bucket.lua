--! id: 2
--! go: LeakyBucket
--! name: leaky_bucket
--! tag: lb:2
--! fields: 2
--! window: false
--! time_field: 2
--! time_unit: us
--! range: continuous
--! max_limit: 1000000000000000
--! fast: true
--! summary: leaky bucket as a meter: the level drains continuously at limit per period_ms
-- Algorithm: leaky bucket as a meter. Each request pours its cost into a
-- bucket of capacity burst that leaks continuously at limit per period_ms; a
-- request is admitted when it fits. It decides as gcra.lua does while the
-- clock runs forward, and keeps the level itself, readable as a meter; a
-- clock that steps back decides as of the level's time.
-- State: "lb:2 x t" for each limit: a level of x / b units at time t
-- microseconds, where a/b is limit per microsecond in lowest terms.
-- Under other limits x is read in the new b's units, and a level past the
-- new capacity as a full bucket: limits with the same b keep guarantee 12,
-- others read another level, since the state does not say which b wrote it.
-- Never more admitted in any span of t ms than burst + limit * t / period_ms.
--@include continuous.lua
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
for i = 1, n do
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, burst, stored_x, stored_t = limit1, period1 * 1000, burst1, s1, s2
  if i > 1 then
--@include keyed.lua
    limit, period_us, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    stored_x, stored_t = more[2 * i - 1], more[2 * i]
  end
  local g, h = limit, period_us % limit -- g: their greatest common divisor (none left to find when limit divides period_us)
  while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
  local a, b = limit / g, period_us / g
  local xmax = burst * b
  -- The level x at time t, drained to now. A clock behind t (it stepped
  -- back) decides as of t, and its waits are longer by t - now.
  local x, t = 0, now
  if stored_t then
    x, t = stored_x, stored_t
    if x > xmax then x = xmax end -- another limit's level: at most full
    if now > t then
      if now - t >= x / a then x = 0 else x = x - (now - t) * a end
      t = now
    end
  end
  local ok, never, retry_us = false, cost > burst, 0
  if not never then
    local over = x + cost * b - xmax
    if over <= 0 or cost == 0 then ok = true else retry_us = t - now + (over + -over % a) / a end
  end
  if ok then x = x + cost * b end
  local room = xmax > x and xmax - x or 0
  local rem, left, per, cap = (room - room % b) / b, room, b, burst -- units left: left / per
  local reset_us = t - now + (x + -x % a) / a
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d', x, t) end
end
--@include write.lua
--@include reply.lua
