-- Algorithm: fixed window (time bucketed). A window of period_ms starts with
-- the first admitted request and allows limit units; when it ends the count
-- starts over. The cheapest to reason about; allows up to 2 * limit across a
-- window boundary.
-- State: a string "fw start count ..." per limit, start in microseconds.
--@include prelude.lua

local SPEC = { name = 'fixed_window', tag = 'fw', per_limit = 2, whole = true, window = true }

local args, err = parse_args(SPEC)
if not args then return redis.error_reply(err) end
local key = KEYS[1]
local state
state, err = read_state(key, SPEC.tag, SPEC.per_limit)
if not state then return redis.error_reply(err) end
local now = clock_us()

local cost = args.cost
local verdicts, fields = {}, {}
for i, lim in ipairs(args.limits) do
  local start, count = state[2 * i - 1], state[2 * i]
  if not start or now >= start + lim.period_us then
    start, count = now, 0 -- a new window opens with this request
  end
  local v = { capacity = lim.limit, ok = false, never = false, retry_us = 0 }
  if cost > lim.limit then
    v.never = true
  elseif count + cost <= lim.limit then
    v.ok = true
    count = count + cost
  else
    v.retry_us = start + lim.period_us - now
  end
  v.rem = count < lim.limit and lim.limit - count or 0
  v.left = v.rem
  v.reset_us = count > 0 and start + lim.period_us - now or 0
  verdicts[i] = v
  fields[2 * i - 1] = start
  fields[2 * i] = count
end

local allowed, reply = decide(verdicts)
if allowed and cost > 0 and not args.check then
  write_state(key, SPEC.tag, fields, ttl_of(verdicts))
end
return reply
