--! id: 4
--! go: FixedWindow
--! name: fixed_window
--! tag: fw:2
--! fields: 2
--! window: true
--! time_field: 1
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
-- they deny (guarantee 12).
-- Never more admitted than limit per window.
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
for i = 1, n do
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, stored_start, stored_count = limit1, period1 * 1000, s1, s2
  if i > 1 then
--@include keyed.lua
    limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000
    stored_start, stored_count = more[2 * i - 1], more[2 * i]
  end
  -- A clock behind the window's start (it stepped back) decides within it.
  local start, count = now, 0
  if stored_count then
    start, count = stored_start, stored_count
    if now >= start + period_us then
      start = now -- a new window opens with this request
      count = 0
    end
  end
  local ok, never, retry_us = false, cost > limit, 0
  if not never then
    if cost == 0 or count + cost <= limit then ok = true else retry_us = start + period_us - now end
  end
  if ok then count = count + cost end
  local rem = count < limit and limit - count or 0
  local left, per, cap = rem, 1, limit
  local reset_us = count > 0 and start + period_us - now or 0
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d', start, count) end
end
--@include write.lua
--@include reply.lua
