--! id: 1
--! go: TokenBucket
--! name: token_bucket
--! tag: tb:2
--! fields: 2
--! window: false
--! time_field: 2
--! time_unit: us
--! range: refill
--! max_limit: 1000000000000000
--! fast: true
--! summary: token bucket with discrete refills: limit tokens every period_ms, up to burst
-- Algorithm: token bucket with discrete refills. The bucket starts full with
-- burst tokens; limit tokens are added every period_ms, counted from the call
-- that created the state, up to burst. A request is admitted when the bucket
-- holds its cost. Simple to explain; a refill arrives all at once.
-- State: "tb:2 tokens t" for each limit: the tokens left after the last
-- refill, which happened at t microseconds.
-- Under other limits the tokens are whole units, kept up to the new burst,
-- and refills go on from t at the new limit: raised limits never deny what
-- the old admit, lowered never admit what they deny (guarantee 12).
-- Never more admitted in any span of t ms than burst + limit * (1 + floor(t / period_ms)).
local function out_of_range(limit, period_ms, burst)
  -- the longest wait: refills until an empty bucket is full (at most burst of them)
  if burst * period_ms * 1000 <= 9007199254740992 then return false end
  return (burst + -burst % limit) / limit * period_ms * 1000 > 9007199254740992
end
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
for i = 1, n do
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, burst, stored_tokens, stored_t = limit1, period1 * 1000, burst1, s1, s2
  if i > 1 then
--@include keyed.lua
    limit, period_us, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    stored_tokens, stored_t = more[2 * i - 1], more[2 * i]
  end
  -- A new bucket starts full, its refills counted from now. A clock behind
  -- the last refill (it stepped back) decides as of that refill.
  local tokens, t = burst, now
  if stored_t then
    tokens, t = stored_tokens, stored_t
    if tokens > burst then tokens = burst end -- state of other limits, in these terms
    if now > t then
      local refills = (now - t - (now - t) % period_us) / period_us
      if refills > 0 then
        t = t + refills * period_us
        if refills * limit >= burst - tokens then tokens = burst else tokens = tokens + refills * limit end
      end
    end
  end
  local ok, never, retry_us = false, cost > burst, 0
  if not never then
    local short = cost - tokens -- ceil(short / limit) refills
    if short <= 0 then ok = true else retry_us = t + (short + -short % limit) / limit * period_us - now end
  end
  if ok then tokens = tokens - cost end
  local reset_us = 0
  local missing = burst - tokens -- ceil(missing / limit) refills
  if missing > 0 then reset_us = t + (missing + -missing % limit) / limit * period_us - now end
  local rem, left, per, cap = tokens, tokens, 1, burst
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d', tokens, t) end
end
--@include write.lua
--@include reply.lua
