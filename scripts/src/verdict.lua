  -- ---- This limit's verdict (scripts/src/verdict.lua) ----
  -- The reply describes the binding limit: on an admission the one with
  -- the fewest units left (rem + frac / per, exactly), on a denial the
  -- denying one with the longest retry_after_ms (-1, never, counts as
  -- longest); for refund and force the one with the longest wait for one
  -- unit after the call, in whole ms as reported, then the fewest units
  -- left; ties go to the earlier.
  if reset_us > ttl_us then ttl_us = reset_us end
  if not least or rem < least then least = rem end
  if settle then touched = units > 0 end -- with several keys, a key whose limit a refund or force left as it was is not written
  if ok or settle then
    if not ok then short = true end
    if units > 0 then changed = true end
    -- fewer units left than the binding limit so far: by whole units first,
    -- then by the parts of a unit left: at once for the same per, else by
    -- less's exact case without a call (some 600 instructions), else by
    -- less (a loop as long as Euclid's)
    local fewer = not a_i or rem < a_rem
    if not fewer and rem == a_rem then
      if per == a_per then
        fewer = frac < a_frac
      else
        local x, y = frac * a_per, a_frac * per
        if x < 9007199254740992 and y < 9007199254740992 then fewer = x < y else fewer = less(frac, per, a_frac, a_per) end
      end
    end
    if settle and a_i then -- the longest wait in whole ms first
      local r, ar = (retry_us + -retry_us % 1000) / 1000, (a_retry + -a_retry % 1000) / 1000
      if r ~= ar then fewer = r > ar end
    end
    if fewer then
      a_i, a_frac, a_per, a_rem, a_reset, a_cap, a_units, a_retry = i, frac, per, rem, reset_us, cap, units, retry_us
    end
  else
    allowed = false
    local retry = never and -1 or (retry_us + -retry_us % 1000) / 1000 -- whole ms, rounded up
    if not d_i or (d_retry ~= -1 and (retry == -1 or retry > d_retry)) then
      d_i, d_retry, d_rem, d_reset, d_cap = i, retry, rem, reset_us, cap
    end
  end
