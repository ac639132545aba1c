
-- ---- The one write (scripts/src/write.lua) ----
-- Only an admitted request with a cost, not a check, records. PSETEX is
-- refused under maxmemory (OOM) before it writes; the key expires when every
-- limit is back to empty, so no cleanup job is needed.
if allowed and writes then
  redis.call('PSETEX', key, (ttl_us + -ttl_us % 1000) / 1000, out) -- whole ms, rounded up
end
