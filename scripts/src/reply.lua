
-- ---- The reply (scripts/src/reply.lua) ----
-- Field 7 is the units recorded on the binding limit (what a check would).
-- refund and force describe the key after the call, with the wait until
-- one unit would be admitted; force is allowed when the empty mode would
-- be.
if settle then return { (short and mode == 'force') and 0 or 1, a_rem, (a_retry + -a_retry % 1000) / 1000, (a_reset + -a_reset % 1000) / 1000, a_cap, a_i, a_units } end
if allowed then return { 1, a_rem, 0, (a_reset + -a_reset % 1000) / 1000, a_cap, a_i, a_units } end
return { 0, d_rem, d_retry, (d_reset + -d_reset % 1000) / 1000, d_cap, d_i, 0 }
