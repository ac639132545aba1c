# Call redisrate's GCRA script from Python (redis-py), contract v2: load it,
# call it, read the reply's fields by name. REDIS_ADDR=127.0.0.1:6379 python3 ratelimit.py
import os
from pathlib import Path

import redis

FIELDS = ("allowed", "remaining", "retry_after_ms", "reset_after_ms", "capacity", "binding")

host, _, port = os.environ.get("REDIS_ADDR", "127.0.0.1:6379").rpartition(":")
r = redis.Redis(host=host, port=int(port))
source = (Path(__file__).resolve().parents[2] / "scripts" / "gcra.lua").read_text()
gcra = r.register_script(source)  # EVALSHA, or EVAL when the server lacks the script


def allow(key, limit, period_ms, burst=0, cost=1):
    """Whole numbers only; burst 0 means burst = limit, cost 0 only reads."""
    reply = gcra(keys=[key], args=[limit, period_ms, burst, cost])
    if not isinstance(reply, list) or len(reply) < 6 or not all(type(x) is int for x in reply[:6]):
        raise ValueError(f"not a redisrate reply: {reply!r}")
    return dict(zip(FIELDS, reply))  # later versions may append fields: ignored


key = os.environ.get("RATE_KEY", "user:42")
for _ in range(3):
    res = allow(key, 2, 60000)  # 2 per minute
    print(" ".join(f"{f}={res[f]}" for f in FIELDS))
