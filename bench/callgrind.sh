#!/usr/bin/env bash
# Instructions per call inside redis-server, counted by callgrind: repeatable
# whatever else the machine is doing, unlike time. For each subject a fresh
# redis-server runs under valgrind on a free 127.0.0.1 port; after a warm-up
# the counters are zeroed, N calls are made over one connection, and the
# instructions Redis executed are divided by N (networking included, the
# same for every subject).
#   bench/callgrind.sh [N] [RUNS]
# (HOT_FOR, default 3s: how long the hot-key rows' 64 callers call)
# (needs valgrind, redis-server, redis-cli, redis-benchmark, bc, python3, go)
# Each subject is measured RUNS times (default 3) and its median kept; the
# table at the end holds each against the peer and its target.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
RUNS=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The peer: go-redis/redis_rate v10's GCRA script, as its module ships it.
# go list -m gives no directory for a module not yet in the module cache (a
# fresh machine): download it first.
peer_src() {
  local dir
  dir=$(cd bench && go mod download github.com/go-redis/redis_rate/v10 && go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
  awk '/^var allowN = redis.NewScript\(`/{f=1;next} f&&/^`\)/{exit} f' "$dir/lua.go"
}

# start_valgrind: a fresh redis-server under callgrind on a free port; sets
# port and vpid. Its callers run in a subshell: a failure stops the server.
start_valgrind() {
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no >"$tmp/vg.log" 2>&1 &
  vpid=$!
  trap 'kill "${vpid:-}" 2>/dev/null' EXIT
  local tries=0
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { echo "redis-server under valgrind did not start: $tmp/vg.log" >&2; exit 1; }
    sleep 0.2
  done
}

measure() { # name, script file, call args... ("FCALL" as the file: the library; "FCALL:<file>": that library)
  local name=$1 file=$2; shift 2
  local port vpid
  start_valgrind
  local cmd
  if [ "${file%%:*}" = FCALL ]; then
    local lib=scripts/library.lua
    [ "$file" = FCALL ] || lib=${file#FCALL:}
    redis-cli -p "$port" -x FUNCTION LOAD REPLACE <"$lib" >/dev/null
    cmd=(FCALL)
  else
    cmd=(EVALSHA "$(redis-cli -p "$port" -x SCRIPT LOAD <"$file")")
  fi
  if [ -n "${PRE:-}" ]; then "$PRE" "$port"; fi # a subject's state before the calls
  for _ in 1 2 3; do redis-cli -p "$port" "${cmd[@]}" "$@" >/dev/null; done
  callgrind_control --zero "$vpid" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$N" -c 1 -q "${cmd[@]}" "$@" >/dev/null
  callgrind_control --dump "$vpid" >/dev/null 2>&1
  # The reply of one more call, after the count: a connection of its own
  # and its call would add some 0.4k to each of the N calls counted.
  local reply; reply=$(redis-cli -p "$port" "${cmd[@]}" "$@" | tr '\n' ' ')
  case "$reply" in # a subject that errs would be counted, not measured
    "" | *ERR* | *NOSCRIPT* | *rror*) echo "$name: the call failed: $reply" >&2; exit 1 ;;
  esac
  local ir; ir=$(ls -t "$tmp"/cg.* | head -1 | xargs grep -h '^summary:' | awk '{print $2}')
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vpid" 2>/dev/null || true
  rm -f "$tmp"/cg.*
  last=$(echo "$ir / $N / 1000" | bc -l)
  printf '%-44s %8.1fk instructions/call   (reply: %s)\n' "$name" "$last" "$reply" >&2
}

# measure_hot NAME SUBJECT: instructions per decision on one hot key, from
# 64 goroutines of the bench program (-drive-hot SUBJECT: ours, the
# Limiter with its coalescing, or peer, redis_rate v10) for HOT_FOR: the
# instructions Redis executed during the run divided by the decisions the
# callers made. A first run of the driver, before the counters are zeroed,
# loads the scripts and warms Redis up.
measure_hot() {
  local name=$1 subject=$2
  local port vpid
  start_valgrind
  redis-cli -p "$port" -x FUNCTION LOAD REPLACE <scripts/library.lua >/dev/null
  "$tmp/hotdrive" --redis "127.0.0.1:$port" -drive-hot "$subject" -for 1s >/dev/null
  callgrind_control --zero "$vpid" >/dev/null 2>&1
  local decisions; decisions=$("$tmp/hotdrive" --redis "127.0.0.1:$port" -drive-hot "$subject" -for "$HOT_FOR")
  callgrind_control --dump "$vpid" >/dev/null 2>&1
  local ir; ir=$(ls -t "$tmp"/cg.* | head -1 | xargs grep -h '^summary:' | awk '{print $2}')
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vpid" 2>/dev/null || true
  rm -f "$tmp"/cg.*
  [ "${decisions:-0}" -gt 0 ] || { echo "$name: no decisions made" >&2; exit 1; }
  last=$(echo "$ir / $decisions / 1000" | bc -l)
  printf '%-44s %8.1fk instructions/decision   (%d decisions in %s)\n' "$name" "$last" "$decisions" "$HOT_FOR" >&2
}
HOT_FOR=${HOT_FOR:-3s}
(cd bench && go build -o "$tmp/hotdrive" .)

peer_src >"$tmp/peer.lua"
[ -s "$tmp/peer.lua" ] || { echo "no allowN script found in go-redis/redis_rate v10's lua.go" >&2; exit 1; }
# Floors by FCALL: what any decision costs at least (TIME, GET, PSETEX, a
# reply of six integers), then with the state read and written as ours is.
cat >"$tmp/floors.lua" <<'LUA'
#!lua name=floors
local match, fmt = ('').match, ('').format
redis.register_function('floor', function(keys)
  local t = redis.call('TIME')
  redis.call('GET', keys[1])
  redis.call('PSETEX', keys[1], 3600000, t[1] .. t[2])
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

# median NAME FILE ARGS...: the subject measured RUNS times; its median
# (MEASURE=measure_hot: NAME SUBJECT, the hot key's)
median() {
  local vals=()
  for _ in $(seq "$RUNS"); do "${MEASURE:-measure}" "$@"; vals+=("$last"); done
  printf '%s\n' "${vals[@]}" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

declare -A k
allowed=(1 k 1000000 3600000)      # 1,000,000 per hour: every call admitted, state present
denied=(1 k 1 3600000)             # 1 per hour: every call after the first denied
three=(1 k 1000000 3600000 '' '' '' 1000000 60000 '' 46000 86400000 '')
k[floor]=$(median "FCALL floor: TIME GET PSETEX, 6 integers" "FCALL:$tmp/floors.lua" floor "${allowed[@]}")
k[floor_state]=$(median "FCALL floor: + the state read and written" "FCALL:$tmp/floors.lua" floor_state "${allowed[@]}")
k[peer]=$(median "peer: redis_rate v10 GCRA, admitted" "$tmp/peer.lua" 1 k 1000000 1000000 3600 1)
k[peer_denied]=$(median "peer: redis_rate v10 GCRA, denied" "$tmp/peer.lua" 1 k 1 1 3600 1)
k[gcra_fcall]=$(median "FCALL redisrate_gcra, 1 limit" FCALL redisrate_gcra "${allowed[@]}")
k[gcra_eval]=$(median "EVALSHA gcra.lua, 1 limit" scripts/gcra.lua "${allowed[@]}")
k[gcra_fcall_denied]=$(median "FCALL redisrate_gcra, denied" FCALL redisrate_gcra "${denied[@]}")
k[gcra_eval_denied]=$(median "EVALSHA gcra.lua, denied" scripts/gcra.lua "${denied[@]}")
# Contract v4's range past 2^53: 10^9 per 30 days (a level of twice the
# capacity is 5.2 * 10^21 parts of a unit), decided by deep.lua's exact
# arithmetic on two doubles, against the common call.
big=(1 k 1000000000 2592000000)
k[gcra_eval_big]=$(median "EVALSHA gcra.lua, 10^9 per 30 days" scripts/gcra.lua "${big[@]}")
k[gcra_fcall_big]=$(median "FCALL redisrate_gcra, 10^9 per 30 days" FCALL redisrate_gcra "${big[@]}")
# A period other than a second, a minute, an hour or a day, which a script
# reads with find and a conversion instead of a comparison (scripts/src/macros.lua).
k[gcra_eval_other]=$(median "EVALSHA gcra.lua, period 1,800,000 ms" scripts/gcra.lua 1 k 1000000 1800000)
for s in token_bucket leaky_bucket sliding_window fixed_window; do
  k[$s]=$(median "EVALSHA $s.lua, 1 limit" "scripts/$s.lua" "${allowed[@]}")
done
k[sliding_log]=$(median "EVALSHA sliding_log.lua, 1 limit" scripts/sliding_log.lua 1 k 10000 3600000)
k[gcra_fcall3]=$(median "FCALL redisrate_gcra, 3 limits" FCALL redisrate_gcra "${three[@]}")
# The modes by EVALSHA, each writing on every call: upto takes a
# unit; force takes one (1,000,000 per hour: the level grows each call);
# refund gives one back from a full bucket of 1,000,000 (PRE sets it).
full_bucket() { # port: k holds a full gcra:4 bucket of 1,000,000 per hour (x = 10^6 * 3.6 * 10^9), as of now
  local secs; secs=$(redis-cli -p "$1" TIME | head -1)
  redis-cli -p "$1" SET k "gcra:4 3600000000000000 ${secs}000000" >/dev/null
}
k[upto]=$(median "EVALSHA gcra.lua, upto 1" scripts/gcra.lua 1 k 1000000 3600000 '' 1 upto)
k[force]=$(median "EVALSHA gcra.lua, force 1 (a debt)" scripts/gcra.lua 1 k 1000000 3600000 '' 1 force)
k[refund]=$(PRE=full_bucket median "EVALSHA gcra.lua, refund 1" scripts/gcra.lua 1 k 1000000 3600000 '' 1 refund)
# One hot key, 64 callers: the Limiter coalesces the calls it has in
# flight (issue 30); the peer sends each.
k[hot]=$(MEASURE=measure_hot median "hot key, 64 callers, the Limiter" ours)
k[hot_peer]=$(MEASURE=measure_hot median "hot key, 64 callers, the peer" peer)
# Each further limit on one key (3 limits: 1,000,000 per hour and per
# minute, 46,000 per day, the most a day the always-accepted range holds).
k[gcra_eval3]=$(median "EVALSHA gcra.lua, 3 limits" scripts/gcra.lua "${three[@]}")
# Several keys (a user's limit and its organisation's, all or nothing),
# next to the two one-key calls they stand for.
two=(2 '{o}:u' '{o}' 1000000 3600000 '' '' '' 1000000 3600000 '')
k[gcra_eval2k]=$(median "EVALSHA gcra.lua, 2 keys" scripts/gcra.lua "${two[@]}")
k[gcra_fcall2k]=$(median "FCALL redisrate_gcra, 2 keys" FCALL redisrate_gcra "${two[@]}")
k[sl_eval2k]=$(median "EVALSHA sliding_log.lua, 2 keys" scripts/sliding_log.lua 2 '{o}:u' '{o}' 10000 3600000 '' '' '' 10000 3600000 '')

# row NAME VALUE BASE BASENAME TARGET: VALUE against BASE, and the target met or not
row() {
  local ratio; ratio=$(echo "$2 / $3" | bc -l)
  local met=no; [ "$(echo "$ratio <= $5" | bc -l)" = 1 ] && met=yes
  printf '| %-42s | %6.1fk | %5.2fx %-13s | <= %.2fx | %-3s |\n' "$1" "$2" "$ratio" "$4" "$5" "$met"
}
echo
echo "Instructions per call inside redis-server ($(redis-server --version | awk '{print $3}')), median of $RUNS runs of $N calls:"
echo
printf '| %-42s | %7s | %-20s | %-8s | %-3s |\n' call instructions 'against' target met
echo '| --- | --- | --- | --- | --- |'
row "gcra by FCALL" "${k[gcra_fcall]}" "${k[peer]}" "the peer" 0.91
row "gcra by EVALSHA" "${k[gcra_eval]}" "${k[peer]}" "the peer" 0.97
row "gcra denied, by FCALL" "${k[gcra_fcall_denied]}" "${k[peer_denied]}" "peer denied" 0.86
row "gcra denied, by EVALSHA" "${k[gcra_eval_denied]}" "${k[peer_denied]}" "peer denied" 0.92
for s in token_bucket leaky_bucket sliding_window fixed_window; do
  row "$s by EVALSHA" "${k[$s]}" "${k[peer]}" "the peer" 1.00
done
row "3 limits by FCALL" "${k[gcra_fcall3]}" "${k[gcra_fcall]}" "1 limit" 1.75
row "each further limit on one key, by FCALL" "$(echo "(${k[gcra_fcall3]} - ${k[gcra_fcall]}) / 2" | bc -l)" "${k[peer]}" "the peer" 0.42
row "upto by EVALSHA" "${k[upto]}" "${k[peer]}" "the peer" 1.10
row "refund by EVALSHA" "${k[refund]}" "${k[peer]}" "the peer" 1.10
row "force by EVALSHA" "${k[force]}" "${k[peer]}" "the peer" 1.10
row "gcra 10^9 per 30 days by EVALSHA" "${k[gcra_eval_big]}" "${k[gcra_eval]}" "the common" 1.30
row "gcra 10^9 per 30 days by FCALL" "${k[gcra_fcall_big]}" "${k[gcra_fcall]}" "the common" 1.30
row "hot key at 64 callers, per decision" "${k[hot]}" "${k[hot_peer]}" "the peer there" 0.15
echo
printf 'Beside them: the peer %.1fk admitted, %.1fk denied; floors by FCALL %.1fk and %.1fk with the state; gcra by EVALSHA with a period of half an hour (read with find: not a second, a minute, an hour or a day) %.1fk (%.2fx the peer); sliding_log by EVALSHA %.1fk; 3 limits by EVALSHA %.1fk (%.2fx 1 limit).\n' \
  "${k[peer]}" "${k[peer_denied]}" "${k[floor]}" "${k[floor_state]}" "${k[gcra_eval_other]}" "$(echo "${k[gcra_eval_other]} / ${k[peer]}" | bc -l)" "${k[sliding_log]}" "${k[gcra_eval3]}" "$(echo "${k[gcra_eval3]} / ${k[gcra_eval]}" | bc -l)"
printf 'Two keys in one call against two one-key calls: gcra by EVALSHA %.1fk (%.1fk), by FCALL %.1fk (%.1fk); sliding_log by EVALSHA %.1fk (%.1fk).\n' \
  "${k[gcra_eval2k]}" "$(echo "2 * ${k[gcra_eval]}" | bc -l)" "${k[gcra_fcall2k]}" "$(echo "2 * ${k[gcra_fcall]}" | bc -l)" "${k[sl_eval2k]}" "$(echo "2 * ${k[sliding_log]}" | bc -l)"
