--! id: 4
--! go: FixedWindow
--! name: fixed_window
--! tag: fw:2
--! fields: 2
--! window: true
--! time_field: 1
--! positive_field: 2
--! time_unit: us
--! range:
--! max_limit: 1000000000000000
--! fast: true
--! summary: fixed window: starts at the first request, allows limit, expires after period_ms
-- Algorithm: fixed window (time bucketed). A window of period_ms starts with
-- the first admitted request and allows limit units; when it ends the count
-- starts over. The cheapest to reason about; it allows up to 2 * limit
-- across a window boundary.
-- State: "fw:2 start count" for each limit: the window's start in
-- microseconds and the units it has admitted.
-- Under other limits the count is whole units against the new limit:
-- raised limits never deny what the old admit, lowered never admit what
-- they deny (guarantee 12); the window ends on its own period.
-- Modes: upto takes what every limit grants; refund lowers the count, never
-- below 0; force raises it as far as twice the limit.
-- Never more admitted than limit per window.
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
--@fast begin
--@if general
for i = 1, n do
--@end
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, stored_start, stored_count = limit1, period1 * 1000, s1, s2
--@if general
  if i > 1 then
--@include keyed.lua
    limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000
    stored_start, stored_count = more[2 * i - 1], more[2 * i]
  end
--@end
  -- A clock behind the window's start (it stepped back) decides within it.
  local start, count = now, 0
  if stored_count and stored_count > 0 then -- (a count of 0, which a refund leaves, is no window)
    start, count = stored_start, stored_count
    if now >= start + period_us then
      start = now -- a new window opens with this request
      count = 0
    end
  end
  local ok, never, retry_us, units = false, cost > limit, 0, 0
  if not never then
    if cost == 0 or count + cost <= limit then ok = true else retry_us = start + period_us - now end
  end
  if settle then
    if mode == 'refund' then -- up to cost units back, never below 0
      units = count < cost and count or cost
      count = count - units
    else -- force: cost units, as far as twice the limit
      units = 2 * limit - count
      if cost < units then units = cost end
      if units < 0 then units = 0 end -- (a count past it, another limit's: never lowered)
      count = count + units
    end
    retry_us = count < limit and 0 or start + period_us - now -- the wait for one unit, after
  elseif ok then
    count, units = count + cost, cost
  end
  local rem = count < limit and limit - count or 0
  local frac, per, cap = 0, 1, limit
  local reset_us = count > 0 and start + period_us - now or 0
--@if general
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d', start, count) end
end
--@else
  local allowed, out = ok
  if (ok or settle) and writes then out = fmt('@TAG@ %d %d', start, count) end
--@end
--@fast end
--@include upto.lua
--@include write.lua
--@include reply.lua
