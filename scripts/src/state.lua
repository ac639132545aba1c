
-- ---- State (scripts/src/state.lua) ----
-- The value is the tag, then FIELDS whole numbers for each of 1 to 8 limits,
-- separated by single spaces: no leading zeros, each below 2^53, a recorded
-- time (TIME_AT) no later than TIME_MAX. Anything else (another type, a
-- user's value, another script's or version's state) is refused, untouched.
local raw = redis.pcall('GET', key)
local st = nil -- the stored numbers, or nil when the key is empty
if raw then
  if raw.err then -- pcall's error reply: another type (a string's .err is nil)
    return redis.error_reply('ERR key holds a value of another type, not ' .. NAME .. ' state: left untouched')
  end
  -- One match reads the state of as many limits as this call has, the
  -- common case; a state of another number of limits is read field by field.
  st = { match(raw, n == 1 and STATE or '^' .. TAG .. ('').rep(FIELD, n) .. '$') }
  local good = st[1] ~= nil
  if not good then
    local body = match(raw, STATES)
    if body then
      local read = 0
      for f in ('').gmatch(body, ' (%d+)') do
        read = read + 1 + #f
        st[#st + 1] = f
      end
      good = read == #body and #st % FIELDS == 0 and #st <= 8 * FIELDS
    end
  end
  for j = 1, good and #st or 0 do -- every field a whole number below 2^53, a time before 2250
    local f = st[j]
    -- at most 16 digits, and no leading zeros: such a field reads below
    -- 10^(digits - 1), on gopher-lua too (which reads 010 as octal, 8)
    local v = #f <= 16 and f + 0
    if not v or (#f > 1 and v < 10 ^ (#f - 1)) or v > 9007199254740991 or (j % FIELDS == TIME_AT and v > TIME_MAX) then
      good = false
      break
    end
    st[j] = v
  end
  if not good then
    local other = (@OTHERS@)[match(raw, '^(%S+) ') or '']
    if other and other ~= NAME then
      return redis.error_reply('ERR key holds ' .. other .. ' state, not ' .. NAME .. ' state: left untouched')
    end
    return redis.error_reply('ERR key holds a value that is not ' .. NAME .. ' state: left untouched')
  end
end
