-- ---- The one write (scripts/src/write.lua) ----
-- Only an admitted request with a cost, not a check, records; the TTL ends
-- when the state is worth no more than no state at all.
if allowed and writes then
  local value = TAG
  for i = 1, #fields do value = value .. ' ' .. fmt('%.17g', fields[i]) end
  redis.call('SET', key, value, 'PX', us_to_ms(ttl_us))
end
return reply
