# A calendar quota from Python (redis-py) with redisrate's fixed_window
# script, as the Go client's Limit.Calendar does it: 3 a day, reset at
# midnight Pacific time. The key names the day; period_ms is the day's
# length (23, 24 or 25 hours) plus an hour, so the window, which starts at
# the key's first request, outlasts the day; the wait runs to the next
# midnight. REDIS_ADDR=127.0.0.1:6379 python3 calendarquota.py
import math
import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import redis

MARGIN_MS = 3_600_000  # the window outlasts the day by an hour: clocks may disagree
MS = timedelta(milliseconds=1)

host, _, port = os.environ.get("REDIS_ADDR", "127.0.0.1:6379").rpartition(":")
r = redis.Redis(host=host, port=int(port))
source = (Path(__file__).resolve().parents[2] / "scripts" / "fixed_window.lua").read_text()
fixed_window = r.register_script(source)


def first_instant(day: date, tz: ZoneInfo) -> datetime:
    """The day's first instant: midnight, or when the clocks jumped over it."""
    return datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(timezone.utc)


def day_window(tz: ZoneInfo, now: datetime):
    """The calendar day in tz that holds now: its name, start and end."""
    day = now.astimezone(tz).date()
    if now >= first_instant(day + timedelta(days=1), tz):  # an hour repeated after midnight
        day += timedelta(days=1)
    return day.isoformat(), first_instant(day, tz), first_instant(day + timedelta(days=1), tz)


def allow(key, limit, zone, cost=1):
    now = datetime.now(timezone.utc)
    name, start, end = day_window(ZoneInfo(zone), now)
    period_ms = (end - start) // MS + MARGIN_MS
    day_key = f"{key}:{name}"
    allowed, remaining, retry_ms = fixed_window(keys=[day_key], args=[limit, period_ms, 0, cost])[:3]
    if retry_ms > 0:  # the next day's key starts empty at its midnight
        retry_ms = max(1, math.ceil((end - now) / MS))
    return day_key, period_ms, allowed, remaining, retry_ms


key = os.environ.get("RATE_KEY", "user:42")
for _ in range(4):
    day_key, period_ms, allowed, remaining, retry_ms = allow(key, 3, "America/Los_Angeles")
    print(f"key={day_key} period_ms={period_ms} allowed={allowed} remaining={remaining} retry_after_ms={retry_ms}")
