  -- The one write and the reply, for the one limit (write.lua, reply.lua).
  if allowed and writes then
    redis.call('PSETEX', key, (reset_us + -reset_us % 1000) / 1000, out) -- whole ms, rounded up
  end
  return { allowed and 1 or 0, rem, allowed and 0 or never and -1 or (retry_us + -retry_us % 1000) / 1000, (reset_us + -reset_us % 1000) / 1000, cap, 1 }
until true
