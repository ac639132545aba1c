-- ---- The sources' macros (scripts/src/macros.lua) ----
-- A template file: the generator reads the definitions below, each from its
-- "--@define name [kind ...]" line to the next blank line; these comments
-- are for readers of scripts/src and are not copied.
--
-- The sources write "@name(arg)@" where a script and the library do a thing
-- each their way; the generator writes out the definition of name for a
-- script (kind script) or the library (kind library), with @arg@ as arg.
-- Numbers: a script reads the string (helpers.lua, "Numbers"); the library
-- first looks it up in NUM, what earlier calls read (the helpers read as a
-- script does, in both: the library's read() is what fills NUM). A
-- definition may name another as @name@, for the same kind.

-- read: a number argument. (The length first: a string of 1 MB is not
-- scanned twice.)
--@define read script
@fastread@ or whole(@arg@)

--@define read library
NUM[@arg@] or read(@arg@)

-- fastread: a number in the specialized copy (fast.lua): a script takes
-- only the plain form (any other falls to the general code, which reads it
-- or names it in its error).
--@define fastread script
#@arg@ < 16 and find(@arg@, '^[1-9]%d*$') and @arg@ + 0

--@define fastread library
@read@

-- fastperiod and readperiod: period_ms, in the specialized copy and in the
-- general code. A script first compares it with the periods of a second, a
-- minute, an hour and a day, which nearly every limit has (the Go client's
-- PerSecond to PerDay, and what other clients write for them): a
-- comparison of interned strings costs some 40 instructions where find and
-- a conversion cost 1,700, and the number is the same.
--@define periods
@arg@ == '1000' and 1000 or @arg@ == '60000' and 60000 or @arg@ == '3600000' and 3600000 or @arg@ == '86400000' and 86400000 or

--@define fastperiod script
@periods@ @fastread@

--@define readperiod script
@periods@ @read@

--@define fastperiod library
@read@

--@define readperiod library
@read@

-- clock: the seconds of TIME, read. The library reads them as a number
-- (in NUM: they change once a second, some 400 instructions saved per
-- call); a script, which keeps nothing from one call to the next, converts
-- them as it multiplies.
--@define clock script
@arg@

--@define clock library
(@read@)

-- FULL: the pattern of a state of n limits (n a Lua expression): the tag,
-- then each limit's numbers (@LIMIT@, constants.lua). A script builds it
-- when it needs one; the library makes each once, at load (constants.lua).
--@define FULL script
'^' .. TAG .. ('').rep('@LIMIT@', @arg@) .. '$'

--@define FULL library
FULL[@arg@]
