
-- ---- The reply (scripts/src/reply.lua) ----
if allowed then return { 1, a_rem, 0, (a_reset + -a_reset % 1000) / 1000, a_cap, a_i } end
return { 0, d_rem, d_retry, (d_reset + -d_reset % 1000) / 1000, d_cap, d_i }
