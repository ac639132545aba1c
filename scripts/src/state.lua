
-- ---- State (scripts/src/state.lua) ----
-- The value is the tag, then FIELDS whole numbers for each of 1 to 8 limits,
-- each below 2^53, separated by single spaces. Anything else (another type, a
-- user's value, another script's or version's state) is refused, untouched.
local raw = redis.pcall('GET', key)
local st = nil -- the stored numbers, or nil when the key is empty
if raw then
  if type(raw) ~= 'string' then
    return redis.error_reply('ERR key holds a value of another type, not ' .. NAME .. ' state: left untouched')
  end
  -- One limit, the common case, is one match; 2 to 8 limits are read field by field.
  st = { match(raw, STATE) }
  local good = st[1] ~= nil
  if not good then
    local body = match(raw, STATES)
    if body then
      local read = 0
      for f in gmatch(body, ' (%d+)') do
        read = read + 1 + #f
        st[#st + 1] = f
      end
      good = read == #body and #st % FIELDS == 0 and #st <= 8 * FIELDS
    end
  end
  for j = 1, good and #st or 0 do -- every field a whole number below 2^53
    local f = st[j]
    if #f > 16 or f + 0 > 9007199254740991 then
      good = false
      break
    end
    st[j] = f + 0
  end
  if not good then
    local other = (@OTHERS@)[match(raw, '^(%S+) ') or '']
    if other and other ~= NAME then
      return redis.error_reply('ERR key holds ' .. other .. ' state, not ' .. NAME .. ' state: left untouched')
    end
    return redis.error_reply('ERR key holds a value that is not ' .. NAME .. ' state: left untouched')
  end
end
