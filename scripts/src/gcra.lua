--! id: 0
--! go: GCRA
--! name: gcra
--! tag: gcra:2
--! fields: 2
--! window: false
--! time_field: 0
--! ahead_field: 1
--! time_unit: us
--! range: continuous
--! max_limit: 1000000000000000
--! fast: true
--! summary: Generic Cell Rate Algorithm: a theoretical arrival time per limit; smooth and exact
-- Algorithm: GCRA, the Generic Cell Rate Algorithm. Units are spaced
-- period_ms / limit apart on a theoretical arrival time (TAT); a request is
-- admitted when its cost fits before the TAT runs more than burst units ahead
-- of now. It decides as leaky_bucket.lua does, with less state, while the
-- clock runs forward; a clock that steps back finds the TAT further ahead
-- and decides on the clock it read (never more permissive than later on).
-- State: "gcra:2 t r" for each limit: TAT = t + r / a microseconds, 0 <= r < a,
-- where a/b is limit / period_us in lowest terms; t may pass 2^53 (by at
-- most 2^52) late this century, and is then read and written from its text.
-- Under other limits the TAT is kept, and the level it stands for is read
-- at the new rate (an r of another limit as the next microsecond): a changed
-- burst keeps guarantee 12, but a higher limit reads a fuller bucket, since
-- the state does not say which limit wrote it.
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
--@include keyed.lua
    limit, period_us, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    stored_t, stored_r = more[2 * i - 1], more[2 * i]
  end
  local g, h = limit, period_us % limit -- g: their greatest common divisor (none left to find when limit divides period_us)
  while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
  local a, b = limit / g, period_us / g
  local xmax = burst * b
  -- The TAT is now + ahead + r / a microseconds, or now when it has passed
  -- (an empty bucket). Offsets from now stay exact where the TAT itself,
  -- late this century, may pass 2^53 (by at most 2^52).
  local ahead, r = 0, 0
  if stored_r then
    local d = stored_t - now
    if stored_t > 9007199254740991 then -- read exactly from its text: KEYS[i]'s first limit's, or with one key KEYS[1]'s i-th
      local x = match(redis.call('GET', KEYS[i] or KEYS[1]), '^%S+' .. ('').rep(' %d+', KEYS[i] and 0 or 2 * i - 2) .. ' (%d+)')
      d = (('').sub(x, 1, #x - 6) * 1000000 - now) + (('1' .. ('').sub(x, -6)) - 1000000)
    end
    local r0 = stored_r
    if r0 >= a then r0, d = 0, d + 1 end -- another limit's state: no earlier than it held
    if d > 0 or (d == 0 and r0 > 0) then ahead, r = d, r0 end
  end
  -- The level now is x = ahead * a + r; x + cost * b must fit in xmax.
  -- Waits are written without that product, which a clock that stepped back
  -- could push past 2^53; they are then longer by the step (guarantee 9).
  -- (With cost past burst, never, y and the wait are not exact, nor read.)
  local y, never = r + cost * b, cost > burst -- y: the level past the TAT's whole microseconds, with the cost
  local over = y - xmax -- past the capacity, in 1/b units
  local retry_us = ahead + (over + -over % a) / a
  local ok = not never and (retry_us <= 0 or cost == 0)
  if ok then -- the TAT moves on by the cost
    r = y % a
    ahead = ahead + (y - r) / a
  end
  -- The room left, xmax - x; none once x is past xmax, where ahead * a may
  -- pass 2^53, but only by more than xmax (<= 2^52), so the sign holds.
  local room = xmax - ahead * a - r
  if room < 0 then room = 0 end
  local rem, left, per, cap = (room - room % b) / b, room, b, burst -- units left: left / per
  local reset_us = ahead + (r > 0 and 1 or 0)
--@include verdict.lua
  if allowed and writes then
    if now + ahead >= 9007199254740992 then -- past 2^53: whole seconds, then the microseconds, each exact
      local us = now % 1000000 + ahead % 1000000
      local sec = (now - now % 1000000) / 1000000 + (ahead - ahead % 1000000) / 1000000 + (us - us % 1000000) / 1000000
      out = out .. fmt(' %d%06d %d', sec, us % 1000000, r)
    elseif r == 0 then -- always when limit divides period_us (a = 1, as 10 per second): a number fewer to format, some 800 instructions
      out = out .. fmt(' %d 0', now + ahead)
    else
      out = out .. fmt(' %d %d', now + ahead, r)
    end
  end
end
--@include write.lua
--@include reply.lua
