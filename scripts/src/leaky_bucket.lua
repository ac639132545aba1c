--! id: 2
--! go: LeakyBucket
--! name: leaky_bucket
--! tag: lb:3
--! old_tag: lb:2
--! positive_field: 1
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
-- request is admitted when it fits. It decides exactly as gcra.lua does
-- (level.lua, written once for both) and its state reads as a meter.
-- State: "lb:3 x t" for each limit: a level of x / period_us units at time t
-- microseconds. Under other limits x means the same level, since no limit
-- or burst changes its unit: raised limits never deny what the old admit,
-- lowered never admit what they deny (guarantee 12); a state is read as at
-- most twice the capacity, so a debt of other limits is forgiven past that.
-- A clock that steps back decides as of t.
-- Modes: upto takes what every limit grants; refund lowers the level, never
-- below empty; force raises it as far as twice the capacity (a debt).
-- Reads v2's "lb:2 x t" (a level of x / b units, a/b = limit / period_us in
-- lowest terms) as v2.1 read it, and writes lb:3.
-- Never more admitted in any span of t ms than burst + limit * t / period_ms.
--@include continuous.lua
-- v2level is one limit of leaky_bucket's v2 state, "x t" (a level of x /
-- b units at time t, a/b = limit / period_us in lowest terms, g their gcd),
-- read as v2.1 read it: in the units of the limit, at most full; only
-- checked without a limit; nil when not v2 state.
local function v2level(xs, ts, now, limit, period_us, burst, g)
  if #xs > 16 or #ts > 16 or xs + 0 > 9007199254740991 or ts + 0 > TIME_MAX then return nil end
  if not limit then return 0, ts + 0 end
  local x, full = xs + 0, burst * (period_us / g)
  if x > full then x = full end
  return x * g, ts + 0
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
