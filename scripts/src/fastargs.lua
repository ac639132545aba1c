-- ---- Fast path arguments (scripts/src/fastargs.lua) ----
-- The commonest call: one key, one limit, whole numbers written as plain
-- digits, mode empty or check. Such a call is decided by the fast path that
-- follows, with locals only (no tables, no closures): the same integers, the
-- same rounding, the same state and TTL as the full script, which the tests
-- check on random calls. Any other call, every error included, leaves
-- fast_limit nil and goes to the full script, which validates and words
-- everything.
local fast_limit, fast_period, fast_burst, fast_cost, fast_mode
do
  local A, m = ARGV, string.match
  local nargs = #A
  if #KEYS == 1 and nargs >= 2 and nargs <= 5 then
    local ls, ps, bs, cs, ms = A[1], A[2], A[3] or '', A[4] or '', A[5] or ''
    if #ls <= 15 and #ps <= 12 and #bs <= 15 and #cs <= 15 and (ms == '' or ms == 'check')
      and m(ls, '^%d+$') and m(ps, '^%d+$') and (bs == '' or m(bs, '^%d+$')) and (cs == '' or m(cs, '^%d+$')) then
      local limit, period = tonumber(ls), tonumber(ps)
      local burst = bs == '' and 0 or tonumber(bs) -- 0 stands for the default, limit
      local cost = cs == '' and 1 or tonumber(cs)
      if limit > 0 and period > 0 and limit <= 1e15 and period <= 1e12 and burst <= 1e15 and cost <= 1e15
        and (not WINDOW or burst == 0 or burst == limit) then
        fast_limit, fast_period, fast_cost, fast_mode = limit, period, cost, ms
        fast_burst = burst == 0 and limit or burst
      end
    end
  end
end
