-- Algorithm: fixed window (time bucketed). A window of period_ms starts with
-- the first admitted request and allows limit units; when it ends the count
-- starts over. The cheapest to reason about; allows up to 2 * limit across a
-- window boundary.
-- State: a string "fw start count ..." per limit, start in microseconds
-- (in hexadecimal).
local NAME = 'fixed_window'
local TAG = 'fw' -- the state's tag
local PER_LIMIT = 2 -- numbers stored per limit
local WHOLE = true -- limit, burst and cost must be whole numbers
local WINDOW = true -- burst may only be absent, 0 or equal to limit
--@include fastargs.lua
if fast_limit then
  local m, fmod = string.match, math.fmod
  local limit, period, burst, cost, ms = fast_limit, fast_period, fast_burst, fast_cost, fast_mode
  local period_us = period * 1000
  local key = KEYS[1]
  local raw = redis.pcall('GET', key)
  local start, count
  if type(raw) == 'string' then
    local ss, cnt = m(raw, '^fw (%x+) (%x+)$')
    if ss then start, count = tonumber(ss, 16), tonumber(cnt, 16) end
  end
  if raw == false or start then
    local tm = redis.call('TIME')
    local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
    if not start or now >= start + period_us then
      start, count = now, 0 -- a new window opens with this request
    end
    local ok, retry_ms = false, 0
    if cost > limit then
      retry_ms = -1
    elseif count + cost <= limit then
      ok = true
      count = count + cost
    else
      local retry_us = start + period_us - now
      if retry_us <= 0 then
        retry_ms = 0
      else
        local q = fmod(retry_us, 1000)
        retry_ms = q == 0 and retry_us / 1000 or (retry_us - q) / 1000 + 1
      end
    end
    local reset_ms = 0
    if count > 0 then
      local reset_us = start + period_us - now
      if reset_us > 0 then
        local q = fmod(reset_us, 1000)
        reset_ms = q == 0 and reset_us / 1000 or (reset_us - q) / 1000 + 1
      end
    end
    if ok and cost > 0 and ms == '' then
      redis.call('SET', key, string.format('fw %x %x', start, count), 'PX', string.format('%d', reset_ms))
    end
    return { ok and 1 or 0, count < limit and limit - count or 0, retry_ms, reset_ms, limit, 1 }
  end
end
--@include prelude.lua
--@include state.lua

-- ---- Algorithm ----
local verdicts, fields = {}, {}
for i = 1, n_limits do
  local lim = limits[i]
  local start, count = state[2 * i - 1], state[2 * i]
  if not start or now >= start + lim.period_us then
    start, count = now, 0 -- a new window opens with this request
  end
  local ok, never, retry_us = false, false, 0
  if cost > lim.limit then
    never = true
  elseif count + cost <= lim.limit then
    ok = true
    count = count + cost
  else
    retry_us = start + lim.period_us - now
  end
  local rem = count < lim.limit and lim.limit - count or 0
  verdicts[i] = {
    ok = ok, never = never, retry_us = retry_us, capacity = lim.limit,
    rem = rem, left = rem, reset_us = count > 0 and start + lim.period_us - now or 0,
  }
  fields[2 * i - 1] = start
  fields[2 * i] = count
end
--@include decide.lua
--@include write.lua
