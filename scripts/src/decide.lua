-- ---- Decision (scripts/src/decide.lua): all or nothing, and the reply ----
-- Each limit's verdict: ok (the cost fits now), never (it cannot ever fit),
-- retry_us, rem and left (whole and exact units available: after this
-- request when ok, now when not), reset_us (likewise), capacity.
-- The reply describes the binding limit: on a denial the denying limit with
-- the longest retry_after_ms (never counts as longest), on an admission the
-- one with the fewest units left; ties go to the earlier limit.
local allowed = true
for i = 1, n_limits do
  if not verdicts[i].ok then
    allowed = false
    break
  end
end
local pick = nil
for i = 1, n_limits do
  local v = verdicts[i]
  if allowed then
    if not pick or v.left < verdicts[pick].left then pick = i end
  elseif not v.ok then
    if not pick then
      pick = i
    else
      -- compared as the reply shows them, in whole ms: limits whose waits
      -- round to the same retry_after_ms tie, and the earlier binds
      local p = verdicts[pick]
      if not p.never and (v.never or us_to_ms(v.retry_us) > us_to_ms(p.retry_us)) then pick = i end
    end
  end
end
local ttl_us = 0 -- the key lives until its slowest limit is back to empty
for i = 1, n_limits do
  if verdicts[i].reset_us > ttl_us then ttl_us = verdicts[i].reset_us end
end
local bound = verdicts[pick]
local retry_ms = 0
if not allowed then retry_ms = bound.never and -1 or us_to_ms(bound.retry_us) end
local reply = { allowed and 1 or 0, bound.rem, retry_ms, us_to_ms(bound.reset_us), floor(bound.capacity), pick }
