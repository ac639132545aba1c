-- ---- String functions (scripts/src/strings.lua) ----
-- The string functions of every call are fetched here, the rare ones where
-- they are used, through a string's metatable: a Functions library may not
-- read the globals (string, math) while it loads.
local find, match, fmt = ('').find, ('').match, ('').format
