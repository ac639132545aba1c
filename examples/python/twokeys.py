# A user's limit and its organisation's in one call of redisrate's GCRA script
# from Python (redis-py), contract v2.1, several keys: admitted only if both
# limits admit, then recorded on both keys; otherwise neither key is written.
# Each argument is a user of organisation 7 making one request.
# REDIS_ADDR=127.0.0.1:6379 python3 twokeys.py 42 42 42 43 43
import os
import sys
from pathlib import Path

import redis

FIELDS = ("allowed", "remaining", "retry_after_ms", "reset_after_ms", "capacity", "binding")

host, _, port = os.environ.get("REDIS_ADDR", "127.0.0.1:6379").rpartition(":")
r = redis.Redis(host=host, port=int(port))
source = (Path(__file__).resolve().parents[2] / "scripts" / "gcra.lua").read_text()
gcra = r.register_script(source)  # EVALSHA, or EVAL when the server lacks the script


def allow_all(limits, cost=1):
    """limits: 2 to 8 (key, limit, period_ms), keys sharing a hash tag; limit i guards key i."""
    keys = [key for key, _, _ in limits]
    args = [limits[0][1], limits[0][2], 0, cost, ""]  # limit period_ms burst cost mode
    for _, limit, period_ms in limits[1:]:
        args += [limit, period_ms, 0]  # burst 0 means burst = limit
    reply = gcra(keys=keys, args=args)
    if not isinstance(reply, list) or len(reply) < 6 or not all(type(x) is int for x in reply[:6]):
        raise ValueError(f"not a redisrate reply: {reply!r}")
    res = dict(zip(FIELDS, reply))  # later versions may append fields: ignored
    if not 1 <= res["binding"] <= len(keys):
        raise ValueError(f"not a redisrate reply: {reply!r}")
    res["key"] = keys[res["binding"] - 1]  # binding i names the key whose limit bound
    return res


org = "{org:%s}" % os.environ.get("ORG_ID", "7")  # the hash tag: one Cluster slot for both keys
for user in sys.argv[1:]:
    res = allow_all([(f"{org}:user:{user}", 2, 60000), (org, 3, 60000)])  # 2 and 3 per minute
    print(f"user={user} " + " ".join(f"{f}={res[f]}" for f in FIELDS) + f" key={res['key']}")
