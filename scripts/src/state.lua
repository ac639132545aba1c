
-- ---- State (scripts/src/state.lua) ----
-- The value is the tag, then FIELDS whole numbers for each of 1 to 8 limits,
-- separated by single spaces: no leading zeros, each below 2^53, a recorded
-- time (TIME_AT) no later than TIME_MAX, a time ahead of the clock (AHEAD_AT,
-- gcra's TAT) no later than AHEAD_MAX. Anything else (another type, a
-- user's value, another script's or version's state) is refused, untouched.
-- The first limit's numbers are read into locals, the others' (a state of
-- several limits) into a table: a state of one limit builds no table.
-- With several keys, key i holds limit i's state alone: it is read as a
-- one-key call with one limit reads it (the first limit's numbers, the
-- rest checked too), and an error names its position (key #i).
local slots, i, @stored@ -- with several keys, their numbers and the key read; the first limit's (nil: none)
local more = n > 1 and {} or nil -- the other limits' numbers, FIELDS each
while true do -- KEYS[1], then with several keys each in turn
  local raw = redis.pcall('GET', key)
  if raw then
    if raw.err then -- pcall's error reply: another type (a string's .err is nil)
      return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value of another type, not ' .. NAME .. ' state: left untouched')
    end
    -- Each number: at most 16 digits (17 ahead of the clock), no leading zero
    -- (such a field reads below 10^(digits - 1), on gopher-lua too, which
    -- reads 010 as octal), and at most its maximum: TIME_MAX for a recorded
    -- time, AHEAD_MAX ahead of the clock, else 2^53 - 1. (Past 2^53 a number
    -- reads rounded; AHEAD_MAX is chosen so that none past it reads as it.)
    local @texts@, rest = match(raw, STATE)
    local good = rest ~= nil
    if good then
      s@k@ = #t@k@ <= @digits@ and t@k@ + 0 --@each field
      good = good and s@k@ and (#t@k@ == 1 or s@k@ >= 10 ^ (#t@k@ - 1)) and s@k@ <= @max@ --@each field
    end
    if good and rest ~= '' then -- further limits: " n n ..." exactly, FIELDS each, up to 8 limits
      -- One match reads as many further limits as this call has, the common
      -- case; a state of another number of limits is read field by field.
      more = { match(rest, '^' .. ('').rep(' (%d+)', FIELDS * (n - 1)) .. '$') }
      if not more[1] then
        local read = 0
        for f in ('').gmatch(rest, ' (%d+)') do
          read = read + 1 + #f
          more[#more + 1] = f
        end
        good = read == #rest and #more % FIELDS == 0 and #more <= 7 * FIELDS
      end
      for j = 1, good and #more or 0 do
        local f, at = more[j], (j - 1) % FIELDS + 1
--@if ahead
        local v = #f <= (at == AHEAD_AT and 17 or 16) and f + 0
        if not (v and (#f == 1 or v >= 10 ^ (#f - 1)) and v <= (at == TIME_AT and TIME_MAX or at == AHEAD_AT and AHEAD_MAX or 9007199254740991)) then
--@else
        local v = #f <= 16 and f + 0
        if not (v and (#f == 1 or v >= 10 ^ (#f - 1)) and v <= (at == TIME_AT and TIME_MAX or 9007199254740991)) then
--@end
          good = false
          break
        end
        more[j] = v
      end
    end
    if not good then
      local other, which = (@OTHERS@)[match(raw, '^(%S+) ') or ''], k > 1 and ' #' .. (i or 1) or ''
      if other and other ~= NAME then
        return redis.error_reply('ERR key' .. which .. ' holds ' .. other .. ' state, not ' .. NAME .. ' state: left untouched')
      end
      return redis.error_reply('ERR key' .. which .. ' holds a value that is not ' .. NAME .. ' state: left untouched')
    end
  end
  if k == 1 then break end
  -- Several keys: limit i's numbers go to slots, where the loop reads them
  -- as more (limit 1's past the last, until every key is read).
  if not slots then slots, i = {}, 1 end
  slots[(i - 2) % k * FIELDS + @k@] = s@k@ --@each field
  if i == k then
    s@k@ = slots[(k - 1) * FIELDS + @k@] --@each field
    more, key = slots, keys[1]
    break
  end
  @stored@ = nil
  i = i + 1
  key = keys[i]
end
