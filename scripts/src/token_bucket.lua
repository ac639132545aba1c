--! id: 1
--! go: TokenBucket
--! name: token_bucket
--! tag: tb:2
--! fields: 2
--! window: false
--! time_field: 2
--! signed_field: 1
--! time_unit: us
--! range: refill
--! max_limit: 1000000000000
--! fast: true
--! summary: token bucket with discrete refills: limit tokens every period_ms, up to burst
-- Algorithm: token bucket with discrete refills. The bucket starts full with
-- burst tokens; limit tokens are added every period_ms, counted from the call
-- that created the state, up to burst. A request is admitted when the bucket
-- holds its cost. Simple to explain; a refill arrives all at once.
-- State: "tb:2 tokens t" for each limit: the tokens left after the last
-- refill, which happened at t microseconds; below 0 ("-5") after force, a
-- debt the next refills pay first.
-- Under other limits the tokens are whole units, read between -burst and
-- burst of the new limits, and refills go on from t at the new limit:
-- raised limits never deny what the old admit, lowered never admit what
-- they deny (guarantee 12), and a debt past one capacity is forgiven.
-- Modes: upto takes what every limit grants; refund adds tokens up to
-- burst; force takes tokens down to -burst (a debt).
-- Never more admitted in any span of t ms than burst + limit * (1 + floor(t / period_ms)).
-- out_of_range names the argument at fault in a combination the script
-- refuses, or nil: the longest wait, the refills that bring a bucket in
-- debt (-burst) back to burst, must stay within 2^53 microseconds, which
-- every call of the accepted range does (its full drain is at most 10^12
-- ms); past it the error names period_ms past 366 days, else burst.
local function out_of_range(limit, period_ms, burst)
  if 2 * burst * period_ms * 1000 <= 9007199254740992 then return nil end
  if (2 * burst + -(2 * burst) % limit) / limit * period_ms * 1000 <= 9007199254740992 then return nil end
  if period_ms > 31622400000 then return 'period_ms' end
  return 'burst'
end
--@body
--@include args.lua
--@include state.lua
--@include loop.lua
--@fast begin
--@if general
for i = 1, n do
--@end
  -- This limit's arguments and stored numbers (nil: none): the first limit's
  -- in locals, the others' in argv (as numbers by now) and in more.
  local limit, period_us, burst, stored_tokens, stored_t = limit1, period1 * 1000, burst1, s1, s2
--@if general
  if i > 1 then
--@include keyed.lua
    limit, period_us, burst = argv[3 * i], argv[3 * i + 1] * 1000, argv[3 * i + 2]
    stored_tokens, stored_t = more[2 * i - 1], more[2 * i]
  end
--@end
  -- A new bucket starts full, its refills counted from now. A clock behind
  -- the last refill (it stepped back) decides as of that refill.
  local tokens, t, refills = burst, now, 0
  if stored_t then
    tokens, t = stored_tokens, stored_t
    if tokens > burst then tokens = burst elseif tokens < -burst then tokens = -burst end -- state of other limits, in these terms
    if now > t then
      refills = (now - t - (now - t) % period_us) / period_us
      if refills > 0 then
        t = t + refills * period_us
        if refills * limit >= burst - tokens then tokens = burst else tokens = tokens + refills * limit end
      end
    end
  end
  local ok, never, retry_us, units = false, cost > burst, 0, 0
  if not never then
    local short = cost - tokens -- ceil(short / limit) refills
    if short <= 0 or cost == 0 then ok = true else retry_us = t + (short + -short % limit) / limit * period_us - now end
  end
  local keep -- the tokens to write
  if settle then
    -- The state's own tokens, refilled: refund and force change them by
    -- their units, so no forgiveness past -burst (or cut past burst) is
    -- written back (guarantee 12); the next call reads them again.
    keep = tokens
    if stored_t and (stored_tokens > burst or stored_tokens < -burst) then
      keep = stored_tokens
      if keep < burst and refills > 0 then
        if refills * limit >= burst - keep then keep = burst else keep = keep + refills * limit end
      end
    end
    if mode == 'refund' then -- up to cost tokens back, never past burst
      units = burst - keep
    else -- force: cost tokens, as far as -burst
      units = keep + burst
    end
    if cost < units then units = cost end
    if units < 0 then units = 0 end
    if mode == 'refund' then keep = keep + units else keep = keep - units end
    tokens = keep
    if tokens > burst then tokens = burst elseif tokens < -burst then tokens = -burst end
    local short = 1 - tokens -- the wait for one token, after
    retry_us = short > 0 and t + (short + -short % limit) / limit * period_us - now or 0
  elseif ok then
    tokens, units = tokens - cost, cost
  end
  if not keep then keep = tokens end
  local reset_us = 0
  local missing = burst - tokens -- ceil(missing / limit) refills
  if missing > 0 then reset_us = t + (missing + -missing % limit) / limit * period_us - now end
  local rem = tokens > 0 and tokens or 0
  local frac, per, cap = 0, 1, burst
--@if general
--@include verdict.lua
  if allowed and writes then out = out .. fmt(' %d %d', keep, t) end
end
--@else
  local allowed, out = ok
  if (ok or settle) and writes then out = fmt('@TAG@ %d %d', keep, t) end
--@end
--@fast end
--@include upto.lua
--@include write.lua
--@include reply.lua
