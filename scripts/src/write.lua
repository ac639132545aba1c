-- ---- The one write (scripts/src/write.lua) ----
-- Only an admitted request with a cost, not a check, records; the TTL ends
-- when the state is worth no more than no state at all.
if allowed and writes then
  local value = TAG
  for i = 1, #fields do
    local f = fields[i]
    value = value .. (f == floor(f) and fmt(' %x', f) or fmt(' %.17g', f))
  end
  redis.call('SET', key, value, 'PX', fmt('%d', us_to_ms(ttl_us)))
end
return reply
