#!/bin/sh
# Call redisrate's GCRA script with redis-cli (contract v2): load it, call it,
# name the reply's fields. REDIS_ADDR=127.0.0.1:6379 sh ratelimit.sh
set -eu
cli="redis-cli -u redis://${REDIS_ADDR:-127.0.0.1:6379}"
sha=$($cli -x SCRIPT LOAD < "$(dirname "$0")/../../scripts/gcra.lua")
key=${RATE_KEY:-user:42}
for n in 1 2 3; do
  # ARGV: limit period_ms [burst [cost [mode]]], whole numbers: 2 per minute
  reply=$($cli EVALSHA "$sha" 1 "$key" 2 60000)
  set -- $reply
  [ $# -ge 6 ] || { echo "not a redisrate reply: $reply" >&2; exit 1; }
  for x in "$1" "$2" "$3" "$4" "$5" "$6"; do # fields a later version appends: ignored
    case $x in ''|*[!0-9-]*) echo "not a redisrate reply: $reply" >&2; exit 1 ;; esac
  done
  echo "allowed=$1 remaining=$2 retry_after_ms=$3 reset_after_ms=$4 capacity=$5 binding=$6"
done
