  -- ---- This limit's verdict (scripts/src/verdict.lua) ----
  -- The reply describes the binding limit: on an admission (and for refund
  -- and force) the one with the fewest units left (left / per, exactly), on a
  -- denial the denying one with the longest retry_after_ms (-1, never,
  -- counts as longest); ties go to the earlier.
  if reset_us > ttl_us then ttl_us = reset_us end
  if not least or rem < least then least = rem end
  if ok or settle then
    if not ok then short = true end
    if units > 0 then changed = true end
    local fewer = not a_i -- fewer units left than the binding limit so far: less's exact case first, without a call (some 600 instructions)
    if not fewer then
      local x, y = left * a_per, a_left * per
      if x < 9007199254740992 and y < 9007199254740992 then fewer = x < y else fewer = less(left, per, a_left, a_per) end
    end
    if fewer then
      a_i, a_left, a_per, a_rem, a_reset, a_cap, a_units, a_retry = i, left, per, rem, reset_us, cap, units, retry_us
    end
  else
    allowed = false
    local retry = never and -1 or (retry_us + -retry_us % 1000) / 1000 -- whole ms, rounded up
    if not d_i or (d_retry ~= -1 and (retry == -1 or retry > d_retry)) then
      d_i, d_retry, d_rem, d_reset, d_cap = i, retry, rem, reset_us, cap
    end
  end
