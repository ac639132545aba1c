--! id: 5
--! go: SlidingLog
--! name: sliding_log
--! tag: sliding_log:3
--! fields: 0
--! window: true
--! log: true
--! time_field: 0
--! time_unit: us
--! range:
--! max_limit: 10000
--! summary: sliding log: one sorted-set entry per admitted unit; exact over any span, for small limits
-- Algorithm: sliding log. Every admitted unit is one sorted-set entry scored
-- with its time; a request is admitted when the entries within the last
-- period_ms leave room for its cost. Exact over any span, but memory and time
-- grow with limit, which is capped at 10000: for small limits that must be exact.
-- State (v4): a sorted set with one member per admitted unit, named by a
-- sequence number and scored with its time in microseconds, plus the
-- marker member "sliding_log:3" whose score is minus 2 * seq + sign, seq
-- the last sequence number (so it is never inside a window, whose scores
-- are times > 0): entries are named 1, 2, ... while sign is 0, and -1, -2,
-- ... while it is 1; past 2^52 - 1 the sequence starts again from 1 with
-- the other sign, and no entry held is renamed. A sorted set without the
-- marker is not state.
-- Under other limits the entries are whole units, counted in the new
-- window: raised limits never deny what the old admit, lowered never admit
-- what they deny (guarantee 12).
-- Modes: upto takes what every limit grants; refund removes the newest
-- entries; force adds entries as far as twice each limit within its period.
-- Bounded work (guarantee 11): with k keys, cost * k is at most 10000 in
-- every mode, so no call adds more than 10000 entries, and
-- each key trims at most 10000 / k expired entries a call (the rest later;
-- counts and waits read only the window, so the decision stays exact).
-- Never more admitted than limit in any span of period_ms.
--@body
--@include args.lua

-- ---- State: each key's marker, and its newest entry ----
-- With one key, it holds every limit's entries; with several, key i holds
-- limit i's, read as a one-key call with one limit reads it, and an error
-- names its position (key #i). The locals hold KEYS[1]'s numbers; with
-- several keys, logs holds key i's last sequence number, newest entry and
-- time at 3i - 2, 3i - 1 and 3i.
local last_seq, newest, at, logs, i = 0 -- i: with several keys, the key read
while true do -- KEYS[1], then with several keys each in turn
  local marked = redis.pcall('ZSCORE', key, TAG)
  if type(marked) == 'table' then
    return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value of another type, not sliding_log state: left untouched')
  end
  if marked then
    -- The sequence is at most 2^53 - 1, so every entry's number is exact.
    if not find(marked, '^%-%d+$') or #marked > 17 or -marked > 9007199254740991 then
      return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
    end
    last_seq = -marked
    local top = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if top[2] then
      newest = top[2] + 0
      if newest > TIME_MAX or newest % 1 ~= 0 then -- an entry is a whole microsecond before 2250
        return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
      end
    end
  elseif redis.call('EXISTS', key) == 1 then
    return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value that is not sliding_log state: left untouched')
  end
  -- A clock behind the newest entry (it stepped back) decides as of that entry.
  at = now
  if newest and newest > now then at = newest end
  if k == 1 then break end
  -- Several keys: key i's numbers to logs, KEYS[1]'s back in the locals
  -- once every key is read.
  if not logs then logs, i = {}, 1 end
  logs[3 * i - 2], logs[3 * i - 1], logs[3 * i] = last_seq, newest, at
  if i == k then
    key, last_seq, newest, at = keys[1], logs[1], logs[2], logs[3]
    break
  end
  last_seq, newest, i = 0, nil, i + 1
  key = keys[i]
end
-- force with one key and several limits: the log they share takes the
-- fewest units any of them has room for (twice its limit in its period).
local grant
if mode == 'force' and k == 1 and n > 1 then
  grant = cost
  for i = 1, n do
    local limit, period_us = limit1, period1 * 1000
    if i > 1 then limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000 end
    local lo = at - period_us
    if lo < 0 then lo = 0 end
    local count = 0
    if newest and newest > lo then count = redis.call('ZCOUNT', key, '(' .. fmt('%d', lo), '+inf') end
    if 2 * limit - count < grant then grant = 2 * limit - count end
  end
  if grant < 0 then grant = 0 end
end
local longest, give -- the longest period: what the log must keep; refund: the entries to remove (one key)
local backs = k > 1 and {} or nil -- with several keys, what refund or force does to key i
--@include loop.lua
longest, give = 0, 0
for i = 1, n do
  local limit, period_us = limit1, period1 * 1000
  if k > 1 and i == 1 then key, last_seq, newest, at = keys[1], logs[1], logs[2], logs[3] end -- (upto's second pass starts again from KEYS[1])
  if i > 1 then
    limit, period_us = argv[3 * i], argv[3 * i + 1] * 1000
    if k > 1 then -- several keys: KEYS[i]'s log, kept for its limit's period
      key, last_seq, newest, at, longest = keys[i], logs[3 * i - 2], logs[3 * i - 1], logs[3 * i], 0
    end
  end
  if period_us > longest then longest = period_us end
  -- the window is (at - period, at]; the marker's score, <= 0, is never in it
  local lo = at - period_us
  if lo < 0 then lo = 0 end
  local count = 0
  if newest and newest > lo then count = redis.call('ZCOUNT', key, '(' .. fmt('%d', lo), '+inf') end
  local ok, never, retry_us, units = false, cost > limit, 0, 0
  if not never then
    if cost == 0 or count + cost <= limit then ok = true end
  end
  local after = count -- the entries in the window after the call
  if settle then
    if mode == 'refund' then -- the newest entries go first
      units = count < cost and count or cost
      if units > give then give = units end
    else -- force: as far as twice the limit in its period (with one key, the least of its limits: grant)
      units = grant or 2 * limit - count
      if cost < units then units = cost end
      if units < 0 then units = 0 end
      if k == 1 then grant = units end
    end
    if k > 1 then backs[i] = units end
    after = mode == 'refund' and count - units or count + units
    if after >= limit then -- the wait for one unit: until the (after - limit + 1)th oldest has left
      if after - limit >= count then
        retry_us = at + period_us - now -- one of force's new entries
      else
        local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', after - limit, 1)
        retry_us = nth[2] + period_us - now
      end
    end
  elseif ok then
    after, units = count + cost, cost
  elseif not never then
    -- wait until the oldest count + cost - limit entries have left the window
    local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    retry_us = nth[2] + period_us - now
  end
  local rem = after < limit and limit - after or 0
  local frac, per, cap = 0, 1, limit
  local reset_us = 0
  if after > 0 then
    if mode == 'refund' then -- the newest entry left
      reset_us = (units > 0 and redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', after - 1, 1)[2] or newest) + period_us - now
    elseif units > 0 then
      reset_us = at + period_us - now
    else
      reset_us = newest + period_us - now
    end
  end
--@include verdict.lua
end
--@include upto.lua

-- ---- The one write step: add (or remove), trim, expire ----
-- ZADD comes first: under maxmemory (OOM) Redis refuses a script's first
-- write before anything is written, and checks no later command of the
-- script. With several keys, each key in turn, from the last (the loop
-- above left its log in the locals) to KEYS[1], as a one-key call with
-- its limit: its entries at its time, kept for its limit's period.
if allowed and writes and changed then
  local add = mode == 'force' and grant or cost
  while true do
    local at_s = fmt('%d', at)
    if mode == 'refund' then
      local back = k > 1 and backs[i] or give
      if back > 0 then redis.call('ZREMRANGEBYRANK', key, -back, -1) end -- the newest entries (the marker, <= 0, ranks first)
    else
      if mode == 'force' and k > 1 then add = backs[i] end
      -- The marker holds 2 * seq + sign: entries are numbered seq + 1, ...
      -- with sign 0, -(seq + 1), ... with sign 1. Past 2^52 - 1 the sequence
      -- starts again from 1 with the other sign, so that no entry held is
      -- renumbered or replaced (bounded work: no entry is touched but those
      -- this call adds).
      local sign = last_seq % 2
      local seq = (last_seq - sign) / 2
      if seq + add > 4503599627370495 then
        seq = 0
        sign = 1 - sign
      end
      local batch, j = { -(2 * (seq + add) + sign), TAG }, 2
      for e = 1, add do
        batch[j + 1] = at_s
        batch[j + 2] = sign == 0 and seq + e or -(seq + e)
        j = j + 2
        if j >= 4000 or e == add then -- unpack() has a stack of about 8000
          redis.call('ZADD', key, unpack(batch, 1, j))
          j = 0
        end
      end
      if add == 0 then redis.call('ZADD', key, -last_seq, TAG) end
    end
    -- Trim what every window has left: all of it with one key; with k
    -- keys at most 10000 / k entries a key (the oldest; the rest later).
    local lo_s = fmt('%d', at - longest)
    if k == 1 then
      redis.call('ZREMRANGEBYSCORE', key, '(0', lo_s)
    else
      local expired = redis.call('ZCOUNT', key, '(0', lo_s)
      local most = (10000 - 10000 % k) / k
      if expired > 0 then redis.call('ZREMRANGEBYRANK', key, 1, expired < most and expired or most) end
    end
    local top = mode ~= 'refund' and add > 0 and { at_s, at } or redis.call('ZREVRANGEBYSCORE', key, '+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if top[2] then
      local keep_us = top[2] + longest - now
      redis.call('PEXPIRE', key, fmt('%d', (keep_us + -keep_us % 1000) / 1000)) -- as text, as write.lua's TTL
    else
      redis.call('DEL', key) -- no entry left: equal to no state
    end
    if k == 1 or i == 1 then break end
    i = i - 1
    key, last_seq, at, longest = keys[i], logs[3 * i - 2], logs[3 * i], (i > 1 and argv[3 * i + 1] or period1) * 1000
  end
end
--@include reply.lua
