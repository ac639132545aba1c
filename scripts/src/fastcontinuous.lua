-- ---- Continuous bucket fast path (scripts/src/fastcontinuous.lua), for gcra and leaky_bucket ----
-- The continuous bucket of continuous.lua for one limit with locals only: the
-- two scripts differ only in how they read and store the level (TAG).
if fast_limit then
  local m, fmod = string.match, math.fmod
  local limit, period, burst, cost, ms = fast_limit, fast_period, fast_burst, fast_cost, fast_mode
  local period_us = period * 1000
  local g, y = limit, period_us
  while y ~= 0 do
    local r = fmod(g, y)
    g = y
    y = r
  end
  local a, b = limit / g, period_us / g
  local xmax = burst * b
  if xmax <= 4503599627370496 then -- 2^52; past it the full script words the error
    local key = KEYS[1]
    local raw = redis.pcall('GET', key)
    local t, r
    if type(raw) == 'string' then
      local s1, s2 = m(raw, TAG == 'gcra' and '^gcra (%x+) (%x+)$' or '^lb (%x+) (%x+)$')
      if s1 then
        if TAG == 'gcra' then
          t, r = tonumber(s1, 16), tonumber(s2, 16) -- TAT = t + r/a
        else
          r, t = tonumber(s1, 16), tonumber(s2, 16) -- level r at time t
        end
      end
    end
    if raw == false or t then
      local tm = redis.call('TIME')
      local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
      local x = 0
      if t and TAG == 'gcra' then
        x = (t - now) * a + r
        if x < 0 then x = 0 end
      elseif t then -- the stored level, drained since t
        local drained = now > t and (now - t) * a or 0
        x = r > drained and r - drained or 0
      end
      local ok, retry_ms = false, 0
      if cost > burst then
        retry_ms = -1
      elseif x + cost * b <= xmax then
        ok = true
        x = x + cost * b
      else
        local d = x + cost * b - xmax
        local q = fmod(d, a)
        local retry_us = q == 0 and d / a or (d - q) / a + 1
        q = fmod(retry_us, 1000)
        retry_ms = q == 0 and retry_us / 1000 or (retry_us - q) / 1000 + 1
      end
      local room = xmax > x and xmax - x or 0
      local q = fmod(x, a)
      local reset_us = q == 0 and x / a or (x - q) / a + 1
      q = fmod(reset_us, 1000)
      local reset_ms = q == 0 and reset_us / 1000 or (reset_us - q) / 1000 + 1
      if ok and cost > 0 and ms == '' then
        local value
        if TAG == 'gcra' then
          local ahead = (x - fmod(x, a)) / a
          value = string.format('gcra %x %x', now + ahead, x - ahead * a)
        else
          value = string.format('lb %x %x', x, now)
        end
        redis.call('SET', key, value, 'PX', string.format('%d', reset_ms))
      end
      return { ok and 1 or 0, (room - fmod(room, b)) / b, retry_ms, reset_ms, burst, 1 }
    end
  end
end
