
-- ---- State (scripts/src/state.lua) ----
-- The value is the tag, then FIELDS whole numbers for each of 1 to 8 limits,
-- separated by single spaces: no leading zeros, each below 2^53, a recorded
-- time (TIME_AT) no later than TIME_MAX, a level (gcra's, leaky_bucket's)
-- of up to 26 digits, kept as its text past 2^53 - 1. Anything else
-- (another type, a user's value, another script's or version's state) is
-- refused, untouched.
-- n limits' state is read in one match into a table (limit j's field f at
-- FIELDS * (j - 1) + f), one limit's into locals, another number of limits'
-- field by field. With several keys, key i holds limit i's state, read as a
-- one-limit call reads it, and an error names it (key #i).
local slots, i, @stored@ -- with several keys, their numbers and the key read; the first limit's (nil: none)
local more -- every limit's numbers, FIELDS each, when the state holds several limits'
while true do -- KEYS[1], then with several keys each in turn
  local raw = redis.pcall('GET', key)
  if raw then
    if raw.err then -- pcall's error reply: another type (a string's .err is nil)
      return redis.error_reply('ERR key' .. (k > 1 and ' #' .. (i or 1) or '') .. ' holds a value of another type, not ' .. NAME .. ' state: left untouched')
    end
    -- Each number: at most 16 digits (a level 26), no leading zero (such a
    -- field reads below 10^(digits - 1), on gopher-lua too, which reads 010
    -- as octal), and at most its maximum: TIME_MAX for a recorded time, else
    -- 2^53 - 1 (a level: 10^26, its text kept past 2^53 - 1, which reads
    -- rounded).
    if k == 1 and n > 1 then more = { match(raw, @FULL(n)@) } end -- n limits' (the library makes the patterns at load)
    local good = more and more[1] ~= nil
    if not good then
      local @texts@, rest = match(raw, STATE)
      good = rest ~= nil
      if good and rest == '' then -- one limit's
        s@k@ = #t@k@ <= @digits@ and t@k@ + 0 --@each field
        good = good and s@k@ and @zero_s@ <= @max@ --@each field
        @keep@ --@each field
      elseif good then -- another number of limits: " n n ..." exactly, FIELDS each, up to 8 limits
        more = { @texts@ }
        local read = 0
        for f in ('').gmatch(rest, ' (@number@)') do read = read + 1 + #f; more[#more + 1] = f end
        good = read == #rest and #more % FIELDS == 0 and #more <= 8 * FIELDS and not find(raw, ' 0%d') -- no leading zero (FULL's pattern takes none in a time)
      end
    end
    if good and more and more[1] then -- each limit's fields in turn, each checked as one limit's (more is empty after a failed match)
      for j = 0, #more - 1, FIELDS do
        local f = more[j + @k@]; local v = #f <= @digits@ and f + 0; if not (v and @lead_v@ <= @max@) then good = false break end; more[j + @k@] = @keepv@ --@each field
      end
      s@k@ = more[@k@] --@each field
    end
    if not good then
      local other, which = ({ @OTHERS@ })[match(raw, '^(%S+) ') or ''], k > 1 and ' #' .. (i or 1) or ''
      if other and other ~= NAME then
        return redis.error_reply('ERR key' .. which .. ' holds ' .. other .. ' state, not ' .. NAME .. ' state: left untouched')
      end
      return redis.error_reply('ERR key' .. which .. ' holds a value that is not ' .. NAME .. ' state: left untouched')
    end
  end
  if k == 1 then break end
  -- Several keys: limit i's numbers go to slots, where the loop reads them
  -- as more, in the same places as one key's (limit i's field f at
  -- FIELDS * (i - 1) + f).
  if not slots then slots, i = {}, 1 end
  slots[(i - 1) * FIELDS + @k@] = s@k@ --@each field
  if i == k then
    s@k@ = slots[@k@] --@each field
    more, key = slots, keys[1]
    break
  end
  @stored@ = nil
  more = nil
  i = i + 1
  key = keys[i]
end
if n > 1 and not more then more = {} end -- no state yet, or one limit's: the further limits have none
