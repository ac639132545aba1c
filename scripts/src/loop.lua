-- ---- Decision: every limit in turn (scripts/src/loop.lua) ----
-- The empty mode, check and upto are all or nothing; refund and force
-- (settle) act on every limit whatever it decides. upto takes two passes:
-- the first, at cost 0, measures the whole units every limit has left; the
-- second takes the least of them as a call of that cost would (upto.lua).
local settle = mode == 'refund' or mode == 'force'
local want, least = cost -- upto: the units asked for; the fewest whole units a limit has left
if mode == 'upto' then cost = 0 end
local writes, allowed, ttl_us, out, changed, short, touched -- changed: settle altered a limit; short: force past what the empty mode admits; touched: this limit is written
local a_i, a_frac, a_per, a_rem, a_reset, a_cap, a_units, a_retry -- the binding limit if admitted (or settled)
local d_i, d_retry, d_rem, d_reset, d_cap -- the binding limit if denied
local records -- with several keys: key i's state and TTL, at 2i - 1 and 2i (keyed.lua), but the last's
repeat
  writes = cost > 0 and mode ~= 'check' -- only an admitted request with a cost, not a check, records
  allowed, ttl_us, out, changed, short, least, a_i, d_i, records, touched = true, 0, TAG, not settle, false, nil, nil, nil, nil, true
