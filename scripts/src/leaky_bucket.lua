-- Algorithm: leaky bucket as a meter. Each request pours its cost into a
-- bucket of capacity burst that leaks continuously at limit per period_ms; a
-- request is admitted when it fits. Makes the same decisions as GCRA (both are
-- continuous buckets) but keeps the level itself, readable as a meter.
-- State: a string "lb x t ..." per limit, level = x / b units at time t
-- microseconds, where a/b is limit per microsecond in lowest terms.
--@include prelude.lua
--@include continuous.lua

local SPEC = { name = 'leaky_bucket', tag = 'lb', per_limit = 2 }

local args, err = parse_args(SPEC)
if not args then return redis.error_reply(err) end
err = continuous_setup(args)
if err then return redis.error_reply(err) end
local key = KEYS[1]
local state
state, err = read_state(key, SPEC.tag, SPEC.per_limit)
if not state then return redis.error_reply(err) end
local now = clock_us()

local verdicts, fields = {}, {}
for i, lim in ipairs(args.limits) do
  local x, t = state[2 * i - 1], state[2 * i]
  if x then
    local drained = now > t and (now - t) * lim.a or 0
    x = x > drained and x - drained or 0
  else
    x = 0
  end
  local v = continuous_verdict(lim, x)
  verdicts[i] = v
  fields[2 * i - 1] = v.x_after
  fields[2 * i] = now
end

local allowed, reply = decide(verdicts)
if allowed and args.cost > 0 and not args.check then
  write_state(key, SPEC.tag, fields, ttl_of(verdicts))
end
return reply
