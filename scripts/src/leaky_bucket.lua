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
-- upgrade is a v2 state (raw) as lb:3, read as v2.1 read it: each level in
-- the units of the limit at its position (with several keys, key i's), at
-- most full; nil when raw is not v2 state.
local function upgrade(raw, key_i, now, argv, n, limit1, period1, burst1)
  local body = match(raw, '^lb:2( [ %d]*%d)$')
  if not body or find(body, ' 0%d') then return nil end
  local out, j, read = TAG, 0, 0
  for xs, ts in ('').gmatch(body, ' (%d+) (%d+)') do
    j, read = j + 1, read + 2 + #xs + #ts
    local p = key_i or j -- the limit at this position
    if j > 8 or #xs > 16 or #ts > 16 or xs + 0 > 9007199254740991 or ts + 0 > TIME_MAX then return nil end
    local x = 0
    if p <= n then
      local limit, period_us, burst = limit1, period1 * 1000, burst1
      if p > 1 then limit, period_us, burst = argv[3 * p], argv[3 * p + 1] * 1000, argv[3 * p + 2] end
      local g, h = limit, period_us % limit -- their greatest common divisor
      while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
      x = xs + 0
      if x > burst * (period_us / g) then x = burst * (period_us / g) end -- at most full
      x = x * g
    end
    out = out .. fmt(' %d %s', x, ts)
  end
  if read ~= #body then return nil end -- pairs of numbers, single spaces, nothing else
  return out
end
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
--@include level.lua
--@include upto.lua
--@include write.lua
--@include reply.lua
