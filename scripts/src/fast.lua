-- ---- The common call: one key, one limit (scripts/src/fast.lua) ----
-- GENERATED COPY, specialized for the most common call: the generator writes
-- here the sections below and the algorithm's own lines for one key and one
-- limit, without the loop over limits and the choice of a binding limit. It
-- decides exactly as the general code below (scripts/fast_test.go holds the
-- two to the same replies, writes and TTLs), and leaves to it every call it
-- does not take: several keys or limits, an argument not in its plain form,
-- a combination past the always-accepted range, a key that does not hold
-- one limit's state. Those calls then read TIME and the key once more.
repeat
  -- KEYS and ARGV are globals in a script: each is read once.
  local keys, argv = KEYS, ARGV
  local key, ls, ps, bs = keys[1], argv[1], argv[2], argv[3]
  if not ps or not key or keys[2] or bs and argv[6] then break end -- (argv[6]: a further limit; bs first, absent in the common call)
  -- Each number read fresh into a local (gopher-lua mis-assigns "x = f() and
  -- y" to a local that exists); a value past its maximum falls through, so
  -- 16 digits and more need no check of their own.
  -- (A script first compares period_ms with a second, a minute, an hour
  -- and a day: src/macros.lua, fastperiod.)
  local limit1, period1 = @fastread(ls)@, @fastperiod(ps)@
  if not (limit1 and period1 and limit1 >= 1 and limit1 <= MAX_LIMIT and period1 >= 1 and period1 <= 1e12) then break end
  local burst1, cost, mode = limit1, 1, ''
  if bs then -- the optional arguments, when there are any (the common call has none)
    local cs = argv[4]
    mode = argv[5] or ''
    if bs ~= '' then
      local b = @fastread(bs)@
--@if window
      if not b or (b ~= 0 and b ~= limit1) then break end
--@else
      if not b or b > MAX_LIMIT then break end
      if b > 0 then burst1 = b end
--@end
    end
    if cs and cs ~= '' then
      local c = cs == '1' and 1 or cs == '0' and 0 or @fastread(cs)@ -- (1, the default, and 0, a peek, by comparison, as periods)
      if not c or c > 1e15 then break end
      cost = c
    end
    if mode ~= '' and mode ~= 'check' and mode ~= 'upto' and mode ~= 'refund' and mode ~= 'force' then break end
  end
  -- Within the range without its exact rule: max(limit, burst) * period_ms
  -- at most 4 * 10^12, or the default burst (its drain is its period) with
  -- a period of at most 366 days; the general code checks the others.
  if (burst1 > limit1 and burst1 or limit1) * period1 > 4e12 and (burst1 > limit1 or period1 > 31622400000) then break end
  local now
  do
    local t = redis.call('TIME')
    local secs = t[1] -- the library reads it from NUM: the seconds change once a second
    now = @clock(secs)@ * 1000000 + t[2]
  end
  -- The state of exactly one limit, read as state.lua reads it.
  local raw = redis.pcall('GET', key)
  local @stored@
  if raw then
    if raw.err then break end
    local @texts@ = match(raw, STATE1)
    if not t1 then break end
    if #t@k@ > @digits@ then break end --@each field
    s@k@ = t@k@ + 0 --@each field
    if not (@lead_s@ <= @max@) then break end --@each field
  end
  local i = 1 -- the one limit
  -- The modes as the general code takes them (loop.lua, upto.lua): refund
  -- and force act whatever the limit decides; upto runs the limit twice,
  -- at cost 0 to measure what it grants, then taking that.
  local settle, want = mode == 'refund' or mode == 'force', cost
  if mode == 'upto' then cost = 0 end
  repeat -- upto's passes
  local writes = cost > 0 and mode ~= 'check' -- only an admitted request with a cost, not a check, records
