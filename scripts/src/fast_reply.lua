  -- The one write and the reply, for the one limit (write.lua, reply.lua).
  local reset_ms = (reset_us + -reset_us % 1000) / 1000 -- whole ms, rounded up
  if allowed then
    if writes then redis.call('PSETEX', key, fmt('%d', reset_ms), out) end -- the TTL as text (write.lua)
    return { 1, rem, 0, reset_ms, cap, 1, cost }
  end
  return { 0, rem, never and -1 or (retry_us + -retry_us % 1000) / 1000, reset_ms, cap, 1, 0 }
until true
