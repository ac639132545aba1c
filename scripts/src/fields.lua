-- ---- Each field of a limit's state (scripts/src/fields.lua) ----
-- A template file: the generator reads the definitions below, each from its
-- "--@define name [kind ...]" line to the next blank line; these comments
-- are for readers of scripts/src and are not copied.
--
-- A limit's state is a few numbers, its fields (manifest "fields"). Each
-- field is of one kind, from its manifest: time (time_field, a recorded
-- time), big (big_field, a level of up to 26 digits, also positive),
-- positive (positive_field, never 0 in a state of one limit the scripts
-- wrote), signed (signed_field, may be negative), or none of these. A
-- definition for a list of kinds is theirs; one without is every other
-- kind's. In the specialized copy (fast.lua) a big field is read as a
-- positive one: the copy takes no level past 2^53 - 1.
--
-- In state.lua and fast.lua, a line that ends in "--@each field" is written
-- once per field k, with @k@ as k and each @name@ below as the field's
-- definition (so a state of one limit is read into locals, without a table,
-- whatever the number of fields); elsewhere @number@ is the definition for
-- the algorithm's fields (signed when one is). A definition may name
-- another as @name@, for the same kind.

-- number: the digits of a field, in a pattern; field: the field captured,
-- as the pattern of one limit's state (@LIMIT@ in constants.lua) takes it:
-- a recorded time or a positive field without a leading zero, so that it
-- needs no check of its own (a power of 10); a state it does not match (a
-- 0 there, which a state of several limits may hold) is read field by
-- field and checked whole.
--@define number
%d+

--@define number signed
%-?%d+

--@define field
(@number@)

--@define field time big positive
([1-9]%d*)

-- max: the most the field may hold (a recorded time: the year 2250);
-- digits: the most digits its text may have (a sign and 16 digits).
--@define max
9007199254740991

--@define max time
TIME_MAX

--@define max big
1e26

--@define digits
16

--@define digits big
26

--@define digits signed
17

-- zero_s: s@k@, read from the text t@k@, with the check that the text has
-- no leading zero (it reads below 10^(digits - 1)) and, for a signed field,
-- a sign only before a digit other than 0, no "-0", and at least
-- -(2^53 - 1). lead_s: the same, where the pattern does not already make
-- that check; lead_v: lead_s for v, read from the text f.
--@define zero_s
(#t@k@ == 1 or s@k@ >= 10 ^ (#t@k@ - 1)) and s@k@

--@define zero_s signed
(#t@k@ == 1 or s@k@ >= 10 ^ (#t@k@ - 1) or -s@k@ >= 10 ^ (#t@k@ - 2)) and -s@k@ <= 9007199254740991 and s@k@

--@define lead_s
@zero_s@

--@define lead_s time big positive
s@k@

--@define lead_v
(#f == 1 or v >= 10 ^ (#f - 1)) and v

--@define lead_v time big positive
v

--@define lead_v signed
(#f == 1 or v >= 10 ^ (#f - 1) or -v >= 10 ^ (#f - 2)) and -v <= 9007199254740991 and v

-- keep: a level past 2^53 - 1 kept as its text, which deep.lua reads
-- exactly (a line left empty is not written); keepv: the same for v.
--@define keep

--@define keep big
if good and s@k@ > 9007199254740991 then s@k@ = t@k@ end

--@define keepv
v

--@define keepv big
v > 9007199254740991 and f or v
