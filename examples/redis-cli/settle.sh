#!/bin/sh
# A reservation settled and a lease returned, each in one call of redisrate's
# GCRA script with redis-cli (contract v4, modes refund and upto). An LLM
# gateway reserves max_tokens (1000) of a budget of 10000 tokens a minute,
# then settles from the response's usage (300): the 700 unused go back. A
# worker leases up to 50 tokens, spends 20 without a round trip, and gives
# the other 30 back. REDIS_ADDR=127.0.0.1:6379 sh settle.sh
set -eu
cli="redis-cli -u redis://${REDIS_ADDR:-127.0.0.1:6379}"
sha=$($cli -x SCRIPT LOAD < "$(dirname "$0")/../../scripts/gcra.lua")
key="${KEY:-llm:org:7}"
call() { # cost mode: 10000 a minute; prints the fields by name
  reply=$($cli EVALSHA "$sha" 1 "$key" 10000 60000 0 "$1" "$2")
  set -- $reply
  [ $# -ge 7 ] || { echo "not a contract v3 or later reply: $reply" >&2; exit 1; }
  echo "allowed=$1 remaining=$2 units=$7"
}
echo "reserve 1000: $(call 1000 '')"    # all or nothing: units 1000, or 0 and a denial
echo "settle, 700 back: $(call 700 refund)" # units: what went back
echo "lease up to 50: $(call 50 upto)"   # units: what was granted, 0 to 50
echo "return 30: $(call 30 refund)"
