--! id: 5
--! go: SlidingLog
--! name: sliding_log
--! tag: sliding_log:2
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
-- State: a sorted set with one member per admitted unit, named by a sequence
-- number and scored with its time in microseconds, plus the marker member
-- "sliding_log:2" whose score is minus the last sequence number (so it is
-- never inside a window, whose scores are times > 0). A sorted set without
-- the marker is not state.
-- Under other limits the entries are whole units, counted in the new
-- window: raised limits never deny what the old admit, lowered never admit
-- what they deny (guarantee 12).
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
--@include loop.lua
local longest = 0 -- the longest period: what the log must keep
for i = 1, n do
  local limit, period_us = limit1, period1 * 1000
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
  local ok, never, retry_us = false, cost > limit, 0
  if not never then
    if cost == 0 or count + cost <= limit then
      ok = true
    else
      -- wait until the oldest count + cost - limit entries have left the window
      local nth = redis.call('ZRANGEBYSCORE', key, '(' .. fmt('%d', lo), '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
      retry_us = nth[2] + period_us - now
    end
  end
  local after = ok and count + cost or count
  local rem = after < limit and limit - after or 0
  local left, per, cap = rem, 1, limit
  local reset_us = 0
  if ok and cost > 0 then
    reset_us = at + period_us - now
  elseif count > 0 then
    reset_us = newest + period_us - now
  end
--@include verdict.lua
end

-- ---- The one write step: add, trim, expire ----
-- ZADD comes first: under maxmemory (OOM) Redis refuses a script's first
-- write before anything is written, and checks no later command of the
-- script. With several keys, each key in turn, from the last (the loop
-- above left its log in the locals) to KEYS[1], as a one-key call with
-- its limit: its entries at its time, kept for its limit's period.
if allowed and writes then
  while true do
    local at_s = fmt('%d', at)
    -- Past 2^53 - 1 the sequence starts again from 0: the entries still kept
    -- (at most 10,000, by the cap) hold the last numbers, far from the first.
    if last_seq + cost > 9007199254740991 then last_seq = 0 end
    local batch, j = { -(last_seq + cost), TAG }, 2
    for e = 1, cost do
      batch[j + 1] = at_s
      batch[j + 2] = last_seq + e
      j = j + 2
      if j >= 4000 or e == cost then -- unpack() has a stack of about 8000
        redis.call('ZADD', key, unpack(batch, 1, j))
        j = 0
      end
    end
    redis.call('ZREMRANGEBYSCORE', key, '(0', fmt('%d', at - longest))
    local keep_us = at - now + longest
    redis.call('PEXPIRE', key, fmt('%d', (keep_us + -keep_us % 1000) / 1000)) -- as text, as write.lua's TTL
    if k == 1 or i == 1 then break end
    i = i - 1
    key, last_seq, at, longest = keys[i], logs[3 * i - 2], logs[3 * i], (i > 1 and argv[3 * i + 1] or period1) * 1000
  end
end
--@include reply.lua
