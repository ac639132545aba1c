#!/usr/bin/env bash
# Instructions per call inside redis-server, counted by callgrind: repeatable
# whatever else the machine is doing, unlike time. For each subject a fresh
# redis-server runs under valgrind on a free 127.0.0.1 port; after a warm-up
# the counters are zeroed, N calls are made over one connection, and the
# instructions Redis executed are divided by N (networking included, the
# same for every subject).
#   bench/callgrind.sh [N]        (needs valgrind, redis-server, redis-cli)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The peer: go-redis/redis_rate v10's GCRA script, as its module ships it.
peer_src() {
  (cd bench && go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10) |
    xargs -I{} awk '/^var allowN = redis.NewScript\(`/{f=1;next} f&&/^`\)/{exit} f' {}/lua.go
}

measure() { # name, script file, call args... ("FCALL" as the file: the library; "FCALL:<file>": that library)
  local name=$1 file=$2; shift 2
  local port; port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no >"$tmp/vg.log" 2>&1 &
  local vpid=$!
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
  local cmd
  if [ "${file%%:*}" = FCALL ]; then
    local lib=scripts/library.lua
    [ "$file" = FCALL ] || lib=${file#FCALL:}
    redis-cli -p "$port" -x FUNCTION LOAD REPLACE <"$lib" >/dev/null
    cmd=(FCALL)
  else
    cmd=(EVALSHA "$(redis-cli -p "$port" -x SCRIPT LOAD <"$file")")
  fi
  for _ in 1 2 3; do redis-cli -p "$port" "${cmd[@]}" "$@" >/dev/null; done
  callgrind_control --zero "$vpid" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$N" -c 1 -q "${cmd[@]}" "$@" >/dev/null
  local reply; reply=$(redis-cli -p "$port" "${cmd[@]}" "$@" | tr '\n' ' ')
  callgrind_control --dump "$vpid" >/dev/null 2>&1
  local ir; ir=$(ls -t "$tmp"/cg.* | head -1 | xargs grep -h '^summary:' | awk '{print $2}')
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vpid" 2>/dev/null || true
  rm -f "$tmp"/cg.*
  printf '%-40s %8.1fk instructions/call   (reply: %s)\n' "$name" "$(echo "$ir / $N / 1000" | bc -l)" "$reply"
  per_call[$name]=$(echo "$ir / $N / 1000" | bc -l)
}
declare -A per_call # by subject: thousands of instructions per call

printf 'return 1\n' >"$tmp/one.lua"
printf "local t = redis.call('TIME')\nlocal v = redis.call('GET', KEYS[1])\nredis.call('PSETEX', KEYS[1], 3600000, t[1] .. t[2])\nreturn { 1, 2, 3, 4, 5, 6 }\n" >"$tmp/floor.lua"
peer_src >"$tmp/peer.lua"
measure "return 1 (ceiling)" "$tmp/one.lua" 1 k 1000000 3600000
measure "floor: TIME GET PSETEX, 6 integers" "$tmp/floor.lua" 1 k 1000000 3600000
measure "peer: redis_rate v10 GCRA" "$tmp/peer.lua" 1 k 1000000 1000000 3600 1
for s in gcra token_bucket leaky_bucket sliding_window fixed_window; do
  measure "EVALSHA $s.lua, 1 limit" "scripts/$s.lua" 1 k 1000000 3600000
done
measure "EVALSHA sliding_log.lua, 1 limit" "scripts/sliding_log.lua" 1 k 10000 3600000
measure "FCALL redisrate_gcra, 1 limit" FCALL redisrate_gcra 1 k 1000000 3600000
measure "EVALSHA gcra.lua, 3 limits" scripts/gcra.lua 1 k 1000000 3600000 '' '' '' 1000000 3600000 '' 1000000 3600000 ''
measure "FCALL redisrate_gcra, 3 limits" FCALL redisrate_gcra 1 k 1000000 3600000 '' '' '' 1000000 3600000 '' 1000000 3600000 ''
# Several keys (a user's limit and its organisation's, all or nothing),
# next to the two one-key calls they stand for.
measure "EVALSHA gcra.lua, 2 keys" scripts/gcra.lua 2 '{o}:u' '{o}' 1000000 3600000 '' '' '' 1000000 3600000 ''
measure "FCALL redisrate_gcra, 2 keys" FCALL redisrate_gcra 2 '{o}:u' '{o}' 1000000 3600000 '' '' '' 1000000 3600000 ''
measure "EVALSHA sliding_log.lua, 2 keys" scripts/sliding_log.lua 2 '{o}:u' '{o}' 10000 3600000 '' '' '' 10000 3600000 ''
for s in "EVALSHA gcra.lua" "FCALL redisrate_gcra" "EVALSHA sliding_log.lua"; do
  printf '%-40s %8.1fk instructions/call   (2 keys: %.1fk)\n' "$s, 1 limit, twice" \
    "$(echo "2 * ${per_call[$s, 1 limit]}" | bc -l)" "${per_call[$s, 2 keys]}"
done

# What the FCALL target leaves room for. Three floors by FCALL, each a
# Functions library that does less than a decision, and the library's gcra
# with its arguments (read and validated) or its decision (the algorithm and
# the binding limit's bookkeeping) replaced by constants: the differences
# are what those parts cost.
cat >"$tmp/floors.lua" <<'LUA'
#!lua name=floors
local fmt, match = ('').format, ('').match
redis.register_function('floor', function(keys)
  local t = redis.call('TIME')
  redis.call('GET', keys[1])
  redis.call('PSETEX', keys[1], 3600000, t[1] .. t[2])
  return { 1, 2, 3, 4, 5, 6 }
end)
redis.register_function('floor_us', function(keys)
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  redis.pcall('GET', keys[1])
  redis.call('PSETEX', keys[1], 3600000, fmt('gcra:2 %d %d', now, 0))
  return { 1, 2, 3, 4, 5, 6 }
end)
redis.register_function('floor_state', function(keys)
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local raw = redis.pcall('GET', keys[1])
  local a, b = match(raw or 'gcra:2 1 0', '^gcra:2 (%d+) (%d+)(.*)$')
  a, b = a + 0, b + 0
  redis.call('PSETEX', keys[1], 3600000, fmt('gcra:2 %d %d', now, 0))
  return { 1, 2, 3, 4, 5, 6 }
end)
LUA
# gcra_lib [from to replacement]...: the library's gcra alone, each span of
# lines from a line that starts with "from" up to (not including) one that
# starts with "to" replaced.
gcra_lib() {
  awk -v spec="$*" '
    BEGIN { n = split(spec, f, "\\|") }
    skip != "" && index($0, skip) == 1 { skip = "" }
    skip != "" { next }
    /^-- ==== token_bucket/ { exit }
    { for (i = 1; i + 2 <= n; i += 3) if (index($0, f[i]) == 1) { print f[i + 2]; skip = f[i + 1]; next } ; print }
    END { print "redis.register_function(\"redisrate_gcra\", gcra)" }
  ' scripts/library.lua
}
args_cut='  local n = 1 -- limits|  -- ---- The clock|  local n, nargs, cost, check, limit1, period1, burst1 = 1, 2, 1, false, 1000000, 3600000, 1000000'
decision_cut='  local writes = cost|  -- ---- The one write|  local allowed, writes, ttl_us, out, a_i, a_rem, a_reset, a_cap = true, true, 3600000000, fmt("%s %d %d", TAG, now, 0), 1, 5, 6, 7'
gcra_lib >"$tmp/gcra.lua"
gcra_lib "$args_cut" >"$tmp/gcra_noargs.lua"
gcra_lib "$decision_cut" >"$tmp/gcra_nodecision.lua"
gcra_lib "$args_cut|$decision_cut" >"$tmp/gcra_neither.lua"
for f in noargs nodecision; do # a cut whose lines moved would measure the whole again
  if cmp -s "$tmp/gcra.lua" "$tmp/gcra_$f.lua"; then echo "callgrind.sh: the $f cut no longer matches scripts/library.lua" >&2; exit 1; fi
done
for f in floor floor_us floor_state; do
  measure "FCALL $f" "FCALL:$tmp/floors.lua" "$f" 1 k 1000000 3600000
done
measure "FCALL gcra alone" "FCALL:$tmp/gcra.lua" redisrate_gcra 1 k 1000000 3600000
measure "FCALL gcra, arguments cut" "FCALL:$tmp/gcra_noargs.lua" redisrate_gcra 1 k 1000000 3600000
measure "FCALL gcra, decision cut" "FCALL:$tmp/gcra_nodecision.lua" redisrate_gcra 1 k 1000000 3600000
measure "FCALL gcra, both cut" "FCALL:$tmp/gcra_neither.lua" redisrate_gcra 1 k 1000000 3600000
