-- ---- Tables of every algorithm (scripts/src/tables.lua) ----
-- A template file: the generator reads the definitions below, each from its
-- "--@define name [kind ...]" line to the next blank line; these comments
-- are for readers of scripts/src and are not copied. Each is one entry per
-- algorithm with a string state (not the sliding log), the entries joined
-- by commas; @NAME@, @TAG@ ... are the algorithm's manifest.

-- other: state.lua's @OTHERS@, which script a tag is, for the error that
-- names another script's state (a table built only on that error's path).
--@define other
['@TAG@'] = '@NAME@'

-- shape: reset.lua's @SHAPES@, the shape of the algorithm's state: numbers
-- per limit; which of them is a recorded time (mod per, -1 for none) and
-- its range; which is a level of up to 26 digits (-1 for none); which may
-- be negative (-1 for none).
--@define shape
['@TAG@'] = { @FIELDS@, @TIME_AT@, @TIME_MAX@, @BIG_AT@, @SIGNED_AT@ }
