-- ---- Helpers (scripts/src/helpers.lua) ----
-- Defined once: at the top of each script, and once at FUNCTION LOAD in the
-- library. Everything below runs the same on Redis's Lua 5.1 and on
-- gopher-lua (miniredis): numbers are read with `s + 0` only after a pattern
-- has proved them digits, and every integer stays below 2^53, where `%` and
-- `/` on doubles are exact.
-- The string functions are read through a string's metatable: a Functions
-- library may not read the globals (string, math) while it loads.
local find, match, gmatch, sub, rep, byte, fmt = ('').find, ('').match, ('').gmatch, ('').sub, ('').rep, ('').byte, ('').format

-- whole reads a contract number: digits only, at most max; nil otherwise.
-- Leading zeros are allowed, and dropped before reading: gopher-lua would
-- read 010 as octal, and past 16 digits it cannot read a number at all.
local function whole(s, max)
  if not find(s, '^%d+$') then return nil end
  if #s > 16 or byte(s) == 48 then
    s = match(s, '^0*(%d+)$')
    if #s > 16 then return nil end
  end
  local v = s + 0
  if v > max then return nil end
  return v
end

-- ceil_div is ceil(n / d) for integers, n of any sign, d > 0, |n| + d < 2^53.
local function ceil_div(n, d)
  local r = n % d
  return (n - r) / d + (r > 0 and 1 or 0)
end

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
  if #s > 40 then s = sub(s, 1, 40) .. '...' end
  if i > 1 then name = name .. ' #' .. i end
  return redis.error_reply('ERR invalid ' .. name .. " '" .. s .. "': " .. rule)
end
