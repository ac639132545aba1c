
-- ---- The one write (scripts/src/write.lua) ----
-- An admitted request with a cost records, and so does a refund or a force
-- that changed a limit; a check never does. PSETEX is refused under
-- maxmemory (OOM) before it writes; the key expires when every limit is back
-- to empty, so no cleanup job is needed, and a key a refund left empty is
-- deleted. With several keys, each gets its state and TTL: Redis refuses a
-- script's first write under OOM and no later one, so the first PSETEX fails
-- before any key is written.
if allowed and writes and changed then
  if k > 1 then -- the other keys' records first, then the last key's
    for i = 1, k - 1 do
      local ttl = records[2 * i]
      if ttl > 0 then redis.call('PSETEX', keys[i], fmt('%d', (ttl + -ttl % 1000) / 1000), records[2 * i - 1]) else redis.call('DEL', keys[i]) end
    end
    key = keys[k]
  end
  if ttl_us > 0 then
    redis.call('PSETEX', key, fmt('%d', (ttl_us + -ttl_us % 1000) / 1000), out) -- whole ms, rounded up, as text: Redis writes a number with %.17g, some 2,000 instructions
  else
    redis.call('DEL', key)
  end
end
