
-- ---- The one write (scripts/src/write.lua) ----
-- An admitted request with a cost records, and so does a refund or a force
-- that changed a limit; a check never does. PSETEX is refused under
-- maxmemory (OOM) before it writes; the key expires when every limit is back
-- to empty, so no cleanup job is needed, and a key a refund left empty is
-- deleted. With several keys, each key a refund or force changed gets its
-- state and TTL, every PSETEX before any DEL: Redis refuses a script's
-- first write under OOM and no later one, so the first PSETEX fails before
-- any key is written (a DEL first would let the PSETEXes after it through).
if allowed and writes and changed then
  if k > 1 then
    records[2 * k - 1], records[2 * k] = touched and out, ttl_us
    for i = 1, k do
      local ttl = records[2 * i]
      if records[2 * i - 1] and ttl > 0 then redis.call('PSETEX', keys[i], fmt('%d', (ttl + -ttl % 1000) / 1000), records[2 * i - 1]) end
    end
    for i = 1, k do
      if records[2 * i - 1] and records[2 * i] <= 0 then redis.call('DEL', keys[i]) end
    end
  elseif ttl_us > 0 then
    redis.call('PSETEX', key, fmt('%d', (ttl_us + -ttl_us % 1000) / 1000), out) -- whole ms, rounded up, as text: Redis writes a number with %.17g, some 2,000 instructions
  else
    redis.call('DEL', key)
  end
end
