#!lua name=@LIBRARY@
-- redisrate Functions library, script contract v@CONTRACT@ (CONTRACT.md in the
-- redisrate repository). Redis 7 or later: FUNCTION LOAD REPLACE this file.
--
--   FCALL    redisrate_<algorithm>    1 <key> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--   FCALL    redisrate_<algorithm>    <k> <key1> ... <keyk> <limit> <period_ms> [<burst> [<cost> [<mode> [<limit> <period_ms> <burst>]...]]]
--   FCALL_RO redisrate_<algorithm>_ro <k> <key1> ... <limit> <period_ms> [<burst> [<cost> [<mode> ...]]]
--   FCALL_RO redisrate_version 0
--
-- <algorithm>: @ALGORITHMS@. Each function takes
-- the arguments of <algorithm>.lua and gives its reply; the code below is that
-- script's, with what runs once defined once. The _ro variants are flagged
-- no-writes (FCALL_RO, replicas) and always decide as mode "check" (they
-- refuse upto, refund and force).
-- redisrate_version returns the SHA1 of this library's code, for clients to
-- tell whether the library they find is the one they bundle; every function
-- is also registered under a name bound to that version, <function>_v and
-- the version's first 12 hex digits, which a client calls to be sure that
-- it runs this version and no other (another version loaded by FUNCTION
-- LOAD REPLACE has the same contract names, but not these).

--@helpers
--@algorithm each algorithm: its constants and top-level code once, its per-call code as a function
-- ==== @name@ ====
--@constants
--@top
local function @name@(KEYS, ARGV)
--@body
end

--@end algorithm
-- as_check makes a call decide as mode "check", filling skipped optional
-- positions with "" (their default). A mode that writes becomes a table
-- that holds its error, which no client can send: the script refuses it
-- where it reads the mode, after every argument before it (guarantee 8's
-- order: numkeys 0 or a bad limit is named first). Any other mode is left
-- for the script's own "ERR invalid mode" error.
local function as_check(ARGV, fn)
  local mode = ARGV[5]
  if mode == nil then
    for i = #ARGV + 1, 4 do ARGV[i] = '' end
    ARGV[5] = 'check'
  elseif mode == '' then
    ARGV[5] = 'check'
  elseif mode == 'upto' or mode == 'refund' or mode == 'force' then
    ARGV[5] = { "ERR invalid mode '" .. mode .. "': " .. fn .. "_ro only checks (empty or 'check'); call " .. fn }
  end
  return ARGV
end

--@register each algorithm: its contract names, and the names bound to this version
local function @name@_ro(KEYS, ARGV)
  return @name@(KEYS, as_check(ARGV, '@function@'))
end
redis.register_function('@function@', @name@)
redis.register_function('@function_v@', @name@)
redis.register_function{ function_name = '@function@_ro', flags = { 'no-writes' }, callback = @name@_ro }
redis.register_function{ function_name = '@function_ro_v@', flags = { 'no-writes' }, callback = @name@_ro }
--@end register
redis.register_function{ function_name = '@LIBRARY@_version', flags = { 'no-writes' },
  callback = function() return '@LIBRARY_VERSION@' end }
