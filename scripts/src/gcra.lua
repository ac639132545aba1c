-- Algorithm: GCRA, the Generic Cell Rate Algorithm. Each unit has a theoretical
-- arrival time (TAT) spaced period_ms / limit apart; a request is admitted when
-- its cost fits before TAT runs more than burst units ahead of now. Smooth,
-- exact, and the cheapest state: one rational number per limit.
-- State: a string "gcra t r ..." per limit, TAT = t + r/a microseconds.
--@include prelude.lua
--@include continuous.lua

local SPEC = { name = 'gcra', tag = 'gcra', per_limit = 2 }

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
  local t, r = state[2 * i - 1], state[2 * i]
  local x = t and (t - now) * lim.a + r or 0
  if x < 0 then x = 0 end
  local v = continuous_verdict(lim, x)
  verdicts[i] = v
  local ahead = idiv(v.x_after, lim.a)
  fields[2 * i - 1] = now + ahead
  fields[2 * i] = v.x_after - ahead * lim.a
end

local allowed, reply = decide(verdicts)
if allowed and args.cost > 0 and not args.check then
  write_state(key, SPEC.tag, fields, ttl_of(verdicts))
end
return reply
