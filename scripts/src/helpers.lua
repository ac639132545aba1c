-- ---- Helpers (scripts/src/helpers.lua) ----
-- Defined once: at the top of each script, and once at FUNCTION LOAD in the
-- library. Everything below runs the same on Redis's Lua 5.1 and on
-- gopher-lua (miniredis): numbers are read with `s + 0` only after a pattern
-- has proved them digits, and every integer stays below 2^53, where `%` and
-- `/` on doubles are exact.
-- The string functions are read through a string's metatable: a Functions
-- library may not read the globals (string, math) while it loads.
local find, match, gmatch, sub, rep, fmt = ('').find, ('').match, ('').gmatch, ('').sub, ('').rep, ('').format

-- whole reads a contract number: digits only, at most max; nil otherwise.
local function whole(s, max)
  if not find(s, '^%d+$') then return nil end
  if #s > 16 then
    s = match(s, '^0*(%d+)$') -- leading zeros are allowed, and past 16 digits gopher-lua cannot read it
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

-- invalid is the contract's argument error: the argument, as given, and its rule.
local function invalid(name, i, s, rule)
  if #s > 40 then s = sub(s, 1, 40) .. '...' end
  if i > 1 then name = name .. ' #' .. i end
  return redis.error_reply('ERR invalid ' .. name .. " '" .. s .. "': " .. rule)
end
