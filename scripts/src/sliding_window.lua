--! id: 3
--! go: SlidingWindow
--! name: sliding_window
--! tag: sw:2
--! fields: 3
--! window: true
--! time_field: 1
--! time_unit: ms
--! range: weighted
--! max_limit: 1000000000000000
--! fast: true
--! summary: sliding window counter: aligned windows, the previous one weighted by its overlap
-- Algorithm: sliding window counter. Windows of period_ms are aligned to
-- multiples of period_ms since the Unix epoch; a request is admitted when the
-- current window's count plus the previous window's count, weighted by how
-- much of it the sliding window still overlaps, leaves room for its cost.
-- Close to a true sliding window at the cost of two counters. Time is read in
-- whole milliseconds, rounded down: the previous window then weighs a little
-- more, never less, so the estimate errs against the caller.
-- State: "sw:2 start previous current" for each limit: the current window's
-- start in milliseconds since the epoch and the two windows' counts.
-- Under other limits the counts are whole units against the new limit:
-- raised limits never deny what the old admit, lowered never admit what
-- they deny (guarantee 12); the windows end on their own period.
-- Modes: upto takes what every limit grants; refund lowers the current
-- window's count, then the previous one's, never below 0; force raises the
-- current window's count as far as twice the limit.
-- Never more admitted than limit per aligned window.
local function out_of_range(limit, period_ms)
  -- the weighted count, times period_ms, must stay exact, with a current
  -- window of up to twice the limit (force)
  return limit * period_ms > 2251799813685248 -- 4 * limit * period_ms <= 2^53, exactly: this product stays below 2^53 or errs upward
end
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
--@fast begin
local now_ms = (now - now % 1000) / 1000
--@if general
for i = 1, n do
--@end
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, p, stored, stored_prev, stored_cur = limit1, period1, s1, s2, s3
--@if general
  if i > 1 then
--@include keyed.lua
    limit, p = argv[3 * i], argv[3 * i + 1]
    stored, stored_prev, stored_cur = more[3 * i - 2], more[3 * i - 1], more[3 * i]
  end
--@end
  -- A clock behind the stored window (it stepped back) decides as of its start.
  local at_ms = now_ms
  if stored and stored > now_ms then at_ms = stored end
  local start = at_ms - at_ms % p
  local prev, cur = 0, 0
  if stored == start then
    prev, cur = stored_prev, stored_cur
  elseif stored == start - p then
    prev = stored_cur
  end
  if cur > 2 * limit then cur = 2 * limit end -- (another limit's count: the weighted sums stay exact)
  if prev > 2 * limit then prev = 2 * limit end
  -- used is the weighted count times p: prev * (p - into) / p + cur
  local into = at_ms - start
  local used = prev * (p - into) + cur * p
  local ok, never, retry_us, units = false, cost > limit, 0, 0
  if not never then
    if cost == 0 or used + cost * p <= limit * p then
      ok = true
    else
      local target_ms
      local room = limit - cost - cur
      if room >= 0 then
        -- later in this window, once the previous one weighs little enough
        target_ms = start + p - (room * p - room * p % prev) / prev
      else
        -- in the next window, where this window's count is the previous one
        local later = p - ((limit - cost) * p - (limit - cost) * p % cur) / cur
        target_ms = start + p + later
      end
      retry_us = target_ms * 1000 - now
    end
  end
  if settle then
    if mode == 'refund' then -- up to cost units back: the current window's first, then the previous one's
      units = cur < cost and cur or cost
      cur = cur - units
      local more_back = cost - units
      if more_back > prev then more_back = prev end
      prev, units = prev - more_back, units + more_back
    else -- force: cost units in the current window, as far as twice the limit
      units = 2 * limit - cur
      if cost < units then units = cost end
      cur = cur + units
    end
    used = prev * (p - into) + cur * p
    retry_us = 0 -- the wait for one unit, after
    if used + p > limit * p then
      local room = limit - 1 - cur
      local target_ms = room >= 0 and start + p - (room * p - room * p % prev) / prev
        or start + p + p - ((limit - 1) * p - (limit - 1) * p % cur) / cur
      retry_us = target_ms * 1000 - now
    end
  elseif ok then
    cur, units = cur + cost, cost
    used = used + cost * p
  end
  local room = limit * p - used
  if room < 0 then room = 0 end
  local rem, left, per, cap = (room - room % p) / p, room, p, limit -- units left: left / per
  local reset_us = 0
  if cur > 0 then
    reset_us = (start + 2 * p) * 1000 - now
  elseif prev > 0 then
    reset_us = (start + p) * 1000 - now
  end
--@if general
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d %d', start, prev, cur) end
end
--@else
  local allowed, out = ok
  if (ok or settle) and writes then out = fmt('@TAG@ %d %d %d', start, prev, cur) end
--@end
--@fast end
--@include upto.lua
--@include write.lua
--@include reply.lua
