    -- (keyed.lua) With several keys, the limit before is KEYS[i - 1]'s, and
    -- its record that key's whole state, kept with its own TTL (write.lua);
    -- false when a refund or force left it as it was.
    if k > 1 and allowed and writes then
      if not records then records = {} end
      records[2 * i - 3], records[2 * i - 2] = touched and out, ttl_us
      out, ttl_us = TAG, 0
    end
