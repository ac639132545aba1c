-- Algorithm: token bucket with discrete refills. The bucket starts full with
-- burst tokens; limit tokens are added every period_ms, counted from the call
-- that created the state, up to burst. A request is admitted when the bucket
-- holds its cost. Simple to explain; a refill arrives all at once.
-- State: a string "tb tokens t ..." per limit, t the time of the last refill
-- in microseconds.
--@include prelude.lua

local SPEC = { name = 'token_bucket', tag = 'tb', per_limit = 2 }

-- ceil_ratio is exact for integers and rounds as well as floats can otherwise.
local function ceil_ratio(n, d)
  if n == floor(n) and d == floor(d) then return cdiv(n, d) end
  return math.ceil(n / d)
end

local args, err = parse_args(SPEC)
if not args then return redis.error_reply(err) end
for _, lim in ipairs(args.limits) do
  -- the longest wait this limit can report: refills until an empty bucket is full
  if ceil_ratio(lim.burst, lim.limit) * lim.period_us > EXACT then return redis.error_reply(too_large(lim)) end
end
local key = KEYS[1]
local state
state, err = read_state(key, SPEC.tag, SPEC.per_limit)
if not state then return redis.error_reply(err) end
local now = clock_us()

local cost = args.cost
local verdicts, fields = {}, {}
for i, lim in ipairs(args.limits) do
  local tokens, last = state[2 * i - 1], state[2 * i]
  if not tokens then
    tokens, last = lim.burst, now
  elseif now > last then
    local refills = idiv(now - last, lim.period_us)
    if refills > 0 then
      tokens = tokens + refills * lim.limit
      last = last + refills * lim.period_us
    end
  end
  if tokens > lim.burst then tokens = lim.burst end

  local v = { capacity = lim.burst, ok = false, never = false, retry_us = 0 }
  if cost > lim.burst then
    v.never = true
  elseif cost <= tokens then
    v.ok = true
    tokens = tokens - cost
  else
    v.retry_us = last + ceil_ratio(cost - tokens, lim.limit) * lim.period_us - now
  end
  v.rem = floor(tokens)
  v.left = tokens
  v.reset_us = 0
  if tokens < lim.burst then
    v.reset_us = last + ceil_ratio(lim.burst - tokens, lim.limit) * lim.period_us - now
  end
  verdicts[i] = v
  fields[2 * i - 1] = tokens
  fields[2 * i] = last
end

local allowed, reply = decide(verdicts)
if allowed and cost > 0 and not args.check then
  write_state(key, SPEC.tag, fields, ttl_of(verdicts))
end
return reply
