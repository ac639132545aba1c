  -- upto's grant after the measuring pass (upto.lua): then the pass again.
  if mode == 'upto' and cost == 0 and want > 0 then
    cost = rem < want and rem or want
    if cost == 0 then cost, mode = 1, 'check' end
  else
    -- The one write and the reply, for the one limit (write.lua, reply.lua).
    local reset_ms = (reset_us + -reset_us % 1000) / 1000 -- whole ms, rounded up
    if settle then
      if units > 0 and writes then
        if reset_ms > 0 then redis.call('PSETEX', key, fmt('%d', reset_ms), out) else redis.call('DEL', key) end
      end
      return { (ok or mode == 'refund') and 1 or 0, rem, (retry_us + -retry_us % 1000) / 1000, reset_ms, cap, 1, units }
    end
    if allowed then
      if writes then redis.call('PSETEX', key, fmt('%d', reset_ms), out) end -- the TTL as text (write.lua)
      return { 1, rem, 0, reset_ms, cap, 1, cost }
    end
    return { 0, rem, never and -1 or (retry_us + -retry_us % 1000) / 1000, reset_ms, cap, 1, 0 }
  end
  until false
until true
