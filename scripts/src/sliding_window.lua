--! id: 3
--! go: SlidingWindow
--! name: sliding_window
--! tag: sw:2
--! fields: 3
--! window: true
--! time_field: 1
--! time_unit: ms
--! range: weighted
--! max_limit: 1000000000000
--! fast: true
--! summary: sliding window counter: aligned windows, the previous one weighted by its overlap
-- Algorithm: sliding window counter. Windows of period_ms are aligned to
-- multiples of period_ms since the Unix epoch; a request is admitted when the
-- current window's count plus the previous window's count, weighted by how
-- much of it the sliding window still overlaps, leaves room for its cost.
-- Close to a true sliding window at the cost of two counters. The overlap is
-- measured in microseconds of TIME: the previous count weighs
-- prev * (period_us - elapsed_us) / period_us, exactly, and a wait ends on
-- the first microsecond that admits.
-- State (v3 and v4): "sw:2 start previous current" for each limit: the
-- current window's start in milliseconds since the epoch and the two
-- windows' counts.
-- Under other limits the counts are whole units against the new limit, read
-- as at most twice it: raised limits never deny what the old admit, lowered
-- never admit what they deny (guarantee 12); the windows end on their own
-- period. refund and force change the stored counts by their units.
-- Modes: upto takes what every limit grants; refund lowers the current
-- window's count, then the previous one's, never below 0; force raises the
-- current window's count as far as twice the limit.
-- Never more admitted than limit per aligned window.
--@include exact.lua
-- out_of_range names the argument at fault in a combination the script
-- refuses, or nil: every period_ms up to 366 days (with limit up to 10^12,
-- args.lua), and every call whose weighted counts, up to twice the limit
-- times period_us, stay within 2^53.
local function out_of_range(limit, period_ms)
  if 2 * limit * period_ms * 1000 <= 9007199254740992 or period_ms <= 31622400000 then return nil end
  return 'period_ms'
end
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
  local limit, p, stored, stored_prev, stored_cur = limit1, period1, s1, s2, s3
--@if general
  if i > 1 then
--@include keyed.lua
    limit, p = argv[3 * i], argv[3 * i + 1]
    stored, stored_prev, stored_cur = more[3 * i - 2], more[3 * i - 1], more[3 * i]
  end
--@end
  -- A clock behind the stored window (it stepped back) decides as of its start.
  local P, at = p * 1000, now
  if stored and stored * 1000 > now then at = stored * 1000 end
  local at_ms = (at - at % 1000) / 1000
  local start = at_ms - at_ms % p
  local e = at - start * 1000 -- microseconds into the window
  local prev, cur = 0, 0 -- the stored counts (refund and force change them)
  if stored == start then
    prev, cur = stored_prev, stored_cur
  elseif stored == start - p then
    prev = stored_cur
  end
  local rp, rc = prev, cur -- the read: at most twice the limit
  if rc > 2 * limit then rc = 2 * limit end
  if rp > 2 * limit then rp = 2 * limit end
  -- Products of counts and periods: exact below 2^53, else by muldiv
  -- (exact.lua), whose divisors (a period, a count) are then below 2^47.
  local big = limit * P > 9007199254740991 or rp * (P - e) > 9007199254740991
--@if fast
  if big then break end -- to the general code
--@end
  -- the previous window's weight, rp * (P - e) / P = wq + wr / P
  local wq, wr
  if big then
    wq, wr = muldiv(rp, P - e, P)
  else
    local w = rp * (P - e)
    wr = w % P
    wq = (w - wr) / P
  end
  local ok, never, retry_us, units = false, cost > limit, 0, 0
  if not never then
    if cost == 0 or rc + cost + wq + (wr > 0 and 1 or 0) <= limit then ok = true end
  end
  local keep_prev, keep_cur = rp, rc -- what to write
  if settle then
    if mode == 'refund' then -- up to cost units back: the current window's first, then the previous one's
      units = cur < cost and cur or cost
      local back = cost - units
      if back > prev then back = prev end
      keep_cur, keep_prev = cur - units, prev - back
      units = units + back
    else -- force: cost units in the current window, as far as twice the limit
      units = 2 * limit - cur
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      keep_cur, keep_prev = cur + units, prev
    end
    rc, rp = keep_cur, keep_prev -- what the next call reads
    if rc > 2 * limit then rc = 2 * limit end
    if rp > 2 * limit then rp = 2 * limit end
    if big then
      wq, wr = muldiv(rp, P - e, P)
    else
      local w = rp * (P - e)
      wr = w % P
      wq = (w - wr) / P
    end
  elseif ok then
    rc, units = rc + cost, cost
    keep_cur, keep_prev = rc, rp
  end
  if settle or not (ok or never) then
    -- The first microsecond a call of need units is admitted (refund and
    -- force: one unit, after): in this window once the previous one weighs
    -- rp * (P - d) <= room * P, so at d = P - floor(room * P / rp); else in
    -- the next, where this window's count is the previous one.
    local need = settle and 1 or cost
    local room, q, target = limit - need - rc
    if room >= 0 then
      if rc + need + wq + (wr > 0 and 1 or 0) > limit then
        if big then q = muldiv(room, P, rp) else q = room * P; q = (q - q % rp) / rp end
        target = start * 1000 + P - q
      end
    else
      if big then q = muldiv(limit - need, P, rc) else q = (limit - need) * P; q = (q - q % rc) / rc end
      target = start * 1000 + 2 * P - q
    end
    retry_us = target and target - now or 0
  end
  -- units left: limit - rc - rp * (P - e) / P = rem + frac / P
  local rem, frac = limit - rc - wq, 0
  if wr > 0 then
    rem = rem - 1
    frac = P - wr
  end
  if rem < 0 then
    rem = 0
    frac = 0
  end
  local per, cap = P, limit
  local reset_us = 0
  if rc > 0 then
    reset_us = (start + 2 * p) * 1000 - now
  elseif rp > 0 then
    reset_us = (start + p) * 1000 - now
  end
--@if general
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d %d', start, keep_prev, keep_cur) end
end
--@else
  local allowed, out = ok
  if (ok or settle) and writes then out = fmt('@TAG@ %d %d %d', start, keep_prev, keep_cur) end
--@end
--@fast end
--@include upto.lua
--@include write.lua
--@include reply.lua
