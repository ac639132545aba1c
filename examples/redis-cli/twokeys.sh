#!/bin/sh
# A user's limit and its organisation's in one call of redisrate's GCRA script
# with redis-cli (contract v2.1, several keys): admitted only if both limits
# admit, then recorded on both keys; otherwise neither key is written. Each
# argument is a user of organisation 7 making one request.
# REDIS_ADDR=127.0.0.1:6379 sh twokeys.sh 42 42 42 43 43
set -eu
cli="redis-cli -u redis://${REDIS_ADDR:-127.0.0.1:6379}"
sha=$($cli -x SCRIPT LOAD < "$(dirname "$0")/../../scripts/gcra.lua")
org="{org:${ORG_ID:-7}}" # the hash tag: on a Cluster, both keys are in its slot
for user in "$@"; do
  key="$org:user:$user"
  # KEYS: the user's, the organisation's. ARGV: the user's limit period_ms burst,
  # cost, mode, then the organisation's limit period_ms burst: 2 and 3 per minute
  reply=$($cli EVALSHA "$sha" 2 "$key" "$org" 2 60000 0 1 "" 3 60000 0)
  set -- $reply
  [ $# -ge 6 ] || { echo "not a redisrate reply: $reply" >&2; exit 1; }
  for x in "$1" "$2" "$3" "$4" "$5" "$6"; do # fields a later version appends: ignored
    case $x in ''|*[!0-9-]*) echo "not a redisrate reply: $reply" >&2; exit 1 ;; esac
  done
  case $6 in # binding i names KEYS[i], the key whose limit bound
    1) bound=$key ;;
    2) bound=$org ;;
    *) echo "not a redisrate reply: $reply" >&2; exit 1 ;;
  esac
  echo "user=$user allowed=$1 remaining=$2 retry_after_ms=$3 reset_after_ms=$4 capacity=$5 binding=$6 key=$bound"
done
