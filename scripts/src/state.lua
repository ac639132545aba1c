-- ---- State (scripts/src/state.lua): this script's string state, or refusal ----
-- The value is "<tag> <number> <number> ...": PER_LIMIT numbers per limit
-- position, integers in hexadecimal (read with strtoul, several times cheaper
-- than decimal strtod for 16 digits), fractions in decimal with a "." or "-"
-- (so never taken for hex). A key of another type, a user's value or another
-- script's state is refused, and nothing is written.
local state = {}
do
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    return redis.error_reply(fmt('ERR key holds a value of another type, not %s state: left untouched', NAME))
  end
  if raw then
    local tag = match(raw, '^(%l+) ')
    local ours = tag == TAG
    if ours then
      for word in string.gmatch(sub(raw, #tag + 2), '[^ ]+') do
        local v
        if match(word, '^%x+$') then v = tonumber(word, 16) else v = parse_number(word) end
        if not v then
          ours = false
          break
        end
        state[#state + 1] = v
      end
      ours = ours and #state > 0 and #state % PER_LIMIT == 0
    end
    if not ours then
      local layouts = { gcra = 'gcra', tb = 'token_bucket', lb = 'leaky_bucket', sw = 'sliding_window', fw = 'fixed_window' }
      if tag ~= TAG and layouts[tag] then
        return redis.error_reply(fmt('ERR key holds %s state, not %s state: left untouched', layouts[tag], NAME))
      end
      return redis.error_reply(fmt('ERR key holds a value that is not %s state: left untouched', NAME))
    end
  end
end
