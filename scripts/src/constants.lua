-- ---- Each algorithm's constants (scripts/src/constants.lua) ----
-- A template file: the generator reads the definitions below, each from its
-- "--@define name [kind ...]" line to the next blank line; these comments
-- are for readers of scripts/src and are not copied. @NAME@, @TAG@,
-- @MAX_LIMIT@ ... are the algorithm's manifest (--! lines), @STATE_FIELDS@
-- the pattern of one limit's numbers (fields.lua), @LIMIT@ that pattern
-- with a recorded time and a positive field without a leading zero.

-- constants declares what the shared sections read of the algorithm, in
-- each script after its specialized copy and in the library before the
-- algorithm's function. "--@if library": the library also makes, once at
-- load, the pattern of a state of each number of limits (FULL, read by
-- @FULL(n)@, macros.lua), which a script builds when it needs one (some
-- 1,800 instructions). "--@if log": a sliding log keeps no string state.
--@define constants
-- ---- @NAME@'s constants (from its manifest) ----
local NAME, TAG = '@NAME@', '@TAG@'
local MAX_LIMIT, LIMIT_RULE, BURST_RULE = @MAX_LIMIT@, 'must be a whole number from 1 to @MAX_LIMIT_TEXT@', 'must be a whole number up to @MAX_LIMIT_TEXT@, or 0 or empty for limit'
--@if log
local TIME_MAX = @TIME_MAX@ -- the latest entry: the year 2250, in microseconds
--@else
local TIME_AT, TIME_MAX = @TIME_AT@, @TIME_MAX@ -- which of a limit's fields is a recorded time (0: none), and its range: up to the year 2250
local FIELDS, STATE = @FIELDS@, '^@TAG@@STATE_FIELDS@(.*)$' -- the numbers of one limit; the state: the first limit's, then the rest
--@if library
local FULL = {} -- FULL[n]: the state of n limits, as state.lua matches it
for n = 1, 8 do FULL[n] = @FULL(n)@ end
--@end
--@end

-- inline is, for each constant the specialized copy of the common call
-- (fast.lua) reads, its value as the copy writes it: in a script the copy
-- comes before the constants, so that the common call does not set them
-- (some 500 instructions by EVALSHA). STATE1 is the pattern of a state of
-- one limit, written only there. A constant the copy reads that has no
-- value here fails the generator.
--@define inline TAG
'@TAG@'

--@define inline MAX_LIMIT
@MAX_LIMIT@

--@define inline TIME_MAX
@TIME_MAX@

--@define inline STATE1
'^@TAG@@LIMIT@$'
