
-- ---- The reply (scripts/src/reply.lua) ----
local i, rem, retry, reset_us, cap = a_i, a_rem, 0, a_reset, a_cap
if not allowed then i, rem, retry, reset_us, cap = d_i, d_rem, d_retry, d_reset, d_cap end
return { allowed and 1 or 0, rem, retry, (reset_us + -reset_us % 1000) / 1000, cap, i }
