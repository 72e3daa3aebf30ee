"""Times and durations as users type them on the command line and in forms."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from analytics.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
            None: 1000}


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """``500ms``, ``30s``, ``1m``, ``2h``, ``7d``, ``1w`` (bare numbers are seconds) in ms.

    >>> parse_duration_ms("1m"), parse_duration_ms("90"), parse_duration_ms("250ms")
    (60000, 90000, 250)
    """
    m = _DURATION.match(text)
    if not m:
        raise ConfigError(f"{what} {text!r} is not a duration: write e.g. 30s, 1m, 2h or 7d")
    ms = round(float(m.group(1)) * _UNIT_MS[m.group(2)])
    if ms <= 0:
        raise ConfigError(f"{what} {text!r} must be positive")
    return ms


def parse_time_ms(text: str, now_ms: int | None = None) -> int:
    """An instant: ISO-8601 (UTC unless it says otherwise), epoch seconds, ``now``, ``now-2h``, ``-7d``.

    >>> parse_time_ms("2026-01-05T00:00:00Z")
    1767571200000
    >>> parse_time_ms("now-1h", now_ms=7_200_000), parse_time_ms("-30m", now_ms=7_200_000)
    (3600000, 5400000)
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    t = text.strip()
    if t == "now":
        return now_ms
    if t.startswith("now-") or (t.startswith("-") and not t[1:].replace(".", "").isdigit()):
        return now_ms - parse_duration_ms(t.split("-", 1)[1], "time offset")
    try:
        return round(float(t) * 1000)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"time {text!r}: write ISO-8601 (2026-01-05T09:30Z), epoch seconds, "
                          "now, or now-2h") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return round(dt.timestamp() * 1000)
