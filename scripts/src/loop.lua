
-- ---- Decision: every limit in turn, all or nothing ----
local writes = cost > 0 and not check -- only an admitted request with a cost, not a check, records
local allowed, ttl_us, out = true, 0, TAG -- out: the state to write, built while every limit admits
local a_i, a_left, a_per, a_rem, a_reset, a_cap -- the binding limit if admitted
local d_i, d_retry, d_rem, d_reset, d_cap -- the binding limit if denied
local records -- with several keys: key i's state and TTL, at 2i - 1 and 2i (keyed.lua), but the last's
