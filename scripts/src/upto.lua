  -- ---- upto's passes (scripts/src/upto.lua) ----
  -- After the measuring pass, the grant is the fewest whole units a limit
  -- has left, at most the units asked for; a grant of none is decided as a
  -- check of one unit: a denial, whose wait is the wait for one unit.
  if mode ~= 'upto' or cost > 0 or want == 0 then break end
  cost = least < want and least or want
  if cost == 0 then cost, mode = 1, 'check' end
until false
