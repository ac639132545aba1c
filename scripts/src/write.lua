
-- ---- The one write (scripts/src/write.lua) ----
-- Only an admitted request with a cost, not a check, records. PSETEX is
-- refused under maxmemory (OOM) before it writes; the key expires when every
-- limit is back to empty, so no cleanup job is needed. With several keys,
-- each gets its state and TTL: Redis refuses a script's first write under
-- OOM and no later one, so the first PSETEX fails before any key is written.
if allowed and writes then
  if k > 1 then -- the other keys' records first, then the last key's
    for i = 1, k - 1 do redis.call('PSETEX', keys[i], fmt('%d', (records[2 * i] + -records[2 * i] % 1000) / 1000), records[2 * i - 1]) end
    key = keys[k]
  end
  redis.call('PSETEX', key, fmt('%d', (ttl_us + -ttl_us % 1000) / 1000), out) -- whole ms, rounded up, as text: Redis writes a number with %.17g, some 2,000 instructions
end
