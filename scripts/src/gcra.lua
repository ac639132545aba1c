--! id: 0
--! go: GCRA
--! name: gcra
--! tag: gcra:3
--! old_tag: gcra:2
--! positive_field: 1
--! fields: 2
--! window: false
--! time_field: 2
--! time_unit: us
--! range: continuous
--! max_limit: 1000000000000000
--! fast: true
--! summary: Generic Cell Rate Algorithm: units spaced period_ms / limit apart, up to burst at once; smooth and exact
-- Algorithm: GCRA, the Generic Cell Rate Algorithm. Units are spaced
-- period_ms / limit apart on a theoretical arrival time (TAT); a request is
-- admitted when its cost fits before the TAT runs more than burst units ahead
-- of now. The TAT's distance ahead of now is a level that drains at limit
-- per period_ms, which is what the state keeps, so gcra decides exactly as
-- leaky_bucket.lua does (level.lua, written once for both).
-- State: "gcra:3 x t" for each limit: a level of x / period_us units at time
-- t microseconds (the TAT is t + x / limit). No limit or burst changes what
-- x means: raised limits never deny what the old admit, lowered never admit
-- what they deny (guarantee 12); a state is read as at most twice the
-- capacity, so a debt of other limits is forgiven past that. A clock that
-- steps back decides as of t.
-- Modes: upto takes what every limit grants; refund lowers the level, never
-- below empty; force raises it as far as twice the capacity (a debt).
-- Reads v2's "gcra:2 t r" (a TAT of t + r / a microseconds, a/b = limit /
-- period_us in lowest terms) as v2.1 read it, and writes gcra:3.
-- Never more admitted in any span of t ms than burst + limit * t / period_ms.
--@include continuous.lua
-- v2level is one limit of gcra's v2 state, "t r" (a TAT of t + r / a
-- microseconds, a/b = limit / period_us in lowest terms, g their gcd), read
-- as v2.1 read it: at now, in the terms of the limit, the level x = (TAT -
-- now) * limit, and its time; only checked without a limit; nil when not
-- v2 state. A level past twice the capacity is read as of the time the TAT
-- puts it at twice the capacity, ahead of now (guarantee 9's clock step):
-- its waits are v2.1's, honest, since a state that records only a TAT and
-- is not written on a denial can be read no other way.
local function v2level(ts, rs, now, limit, period_us, burst, g)
  if #ts > 17 or #rs > 16 or ts + 0 > AHEAD_MAX or rs + 0 > 9007199254740991 then return nil end
  if not limit then return 0, now end
  local d, r = ts - now, rs + 0 -- the TAT's whole microseconds ahead of now, and r / a more
  if ts + 0 > 9007199254740991 then -- read exactly from its text
    d = (('').sub(ts, 1, #ts - 6) * 1000000 - now) + (('1' .. ('').sub(ts, -6)) - 1000000)
  end
  if r >= limit / g then r, d = 0, d + 1 end -- another limit's state: no earlier than it held
  if d < 0 or (d == 0 and r == 0) then return 0, now end -- the TAT has passed: empty
  local top = 2 * burst * period_us -- twice the capacity
  if d * limit + r * g <= top then return d * limit + r * g, now end
  local back = (top - r * g - (top - r * g) % limit) / limit -- past it now: as of the time it is twice the capacity
  if now + (d - back) > TIME_MAX then return top, TIME_MAX end -- (a TAT past 2250)
  return back * limit + r * g, now + (d - back)
end
--@include older.lua
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
--@include level.lua
--@include upto.lua
--@include write.lua
--@include reply.lua
