-- ---- Helpers (scripts/src/helpers.lua) ----
-- Defined once: at the top of each script, and once at FUNCTION LOAD in the
-- library. Everything below runs the same on Redis's Lua 5.1 and on
-- gopher-lua (miniredis): numbers are read with `s + 0` only after a pattern
-- has proved them digits, and every integer stays below 2^53, where `%` and
-- `/` on doubles are exact.
-- A call's cost in Redis is counted in instructions (bench/callgrind.sh): a
-- Lua operation is some 30, a string function some 1,000, and every string,
-- table or closure made some 500. So the common call makes few of them.
-- Numbers: an argument in the common form (no leading zero, at most 15
-- digits) is read at once, with one find and s + 0; whole reads the others:
-- digits only, leading zeros dropped before reading (gopher-lua would read
-- 010 as octal), at most 16 digits left; nil otherwise. Past its last 16
-- characters, which hold every digit that counts, a long argument must be
-- zeros: compared whole with as many zeros (copies in C; a Lua pattern
-- over 1 MB of them took 15 to 40 ms, string.rep 20 to 60).
local function whole(s)
  local n = #s
  if n > 16 then
    if ('').byte(s) ~= 48 then return nil end -- more than 16 characters, the first not a zero
    local z, m = '0', n - 16
    while #z < m do z = z .. z end -- (doubled: rep adds one character at a time)
    if ('').sub(s, 1, m) ~= ('').sub(z, 1, m) then return nil end
    s = ('').sub(s, n - 15)
  end
  s = match(s, '^0*(%d+)$')
  if s then return s + 0 end
  return nil
end
--@if library

-- In the library an argument is first looked up in NUM, what each string
-- has read as (a number, or false), kept while the library is loaded: limits
-- are configuration, so the same few strings come on every call, and a
-- lookup costs some 100 instructions where reading costs 2,000. read fills
-- it; only strings of at most 16 characters are kept, and at most 1,024 of
-- them (about 100 KB), after which NUM starts again empty. (A string kept as
-- false is read again on each call, and counted once.)
local NUM, NUMS = {}, 0
local function read(s)
  local v = @read(s)@ or false
  if #s <= 16 then
    if NUM[s] == nil then
      if NUMS == 1024 then NUM, NUMS = {}, 0 end
      NUMS = NUMS + 1
    end
    NUM[s] = v
  end
  return v
end
--@end

-- ceil(n / d), for integers n of any sign and d > 0 with |n| + d < 2^53, is
-- written (n + -n % d) / d where it is needed: % floors, so n + -n % d is
-- the next multiple of d, and the division is exact. (A function would cost
-- a call, and in a script a closure made on every call.)

-- less reports whether a/b < c/d exactly, for whole a, c >= 0 and b, d >= 1
-- below 2^53, where a*d and c*b might not be exact: by whole parts, then
-- by the reciprocals of what is left (a continued fraction).
local function less(a, b, c, d)
  local x, y = a * d, c * b
  if x < 9007199254740992 and y < 9007199254740992 then return x < y end -- both exact
  local flip = false
  while true do
    local p, q = (a - a % b) / b, (c - c % d) / d
    if p ~= q then return (p < q) ~= flip end
    a = a % b
    c = c % d
    if a == 0 and c == 0 then return false end -- equal
    if a == 0 or c == 0 then return (a == 0) ~= flip end
    local b0 = b
    b = a
    a = b0
    local d0 = d
    d = c
    c = d0
    flip = not flip
  end
end

-- invalid is the contract's argument error: the argument, as given, and its rule.
local function invalid(name, i, s, rule)
  if #s > 40 then s = ('').sub(s, 1, 40) .. '...' end
  if i > 1 then name = name .. ' #' .. i end
  return redis.error_reply('ERR invalid ' .. name .. " '" .. s .. "': " .. rule)
end
