-- ---- The v2 state (scripts/src/older.lua) ----
-- upgrade is a v2 state (raw) as this script's v3 state, read as v2.1 read
-- it: each limit's two numbers by v2level, in the terms of the limit at its
-- position (with several keys, key i's; none past the call's limits, which
-- v2level only checks); nil when raw is not v2 state: 1 to 8 pairs of
-- whole numbers without leading zeros, single spaces, nothing else.
local function upgrade(raw, key_i, now, argv, n, limit1, period1, burst1)
  local body = match(raw, OLD_BODY)
  if not body or find(body, ' 0%d') then return nil end
  local out, j, read = TAG, 0, 0
  for as, bs in ('').gmatch(body, ' (%d+) (%d+)') do
    j, read = j + 1, read + 2 + #as + #bs
    local p, limit, period_us, burst, g = key_i or j -- the limit at this position, when there is one
    if p <= n then
      limit, period_us, burst = limit1, period1 * 1000, burst1
      if p > 1 then limit, period_us, burst = argv[3 * p], argv[3 * p + 1] * 1000, argv[3 * p + 2] end
      local h
      g, h = limit, period_us % limit -- their greatest common divisor
      while h > 0 do local m = g % h; g = h; h = m end -- (not g, h = h, g % h: gopher-lua assigns g first)
    end
    local x, t = v2level(as, bs, now, limit, period_us, burst, g)
    if j > 8 or not x then return nil end
    out = out .. fmt(' %d %d', x, t)
  end
  if read ~= #body then return nil end
  return out
end
