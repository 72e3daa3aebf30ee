"""Time as text: the one ISO-8601 UTC formatter, the one parser of typed times, the one step rule
(:func:`parse_step_s`: every ``--step`` and ``--interval``, and a link's ``step=``), and wall-clock
times in a zone.

Every time Tidelens writes as text goes through :func:`iso_utc` (a link's range, a table's
``from``/``to``, an event's start in JSON, a message, a PromQL range), so the app, the CLI and a
report print one instant the same way; :func:`local_naive` is the display side (a slider's
wall clock in the zone the user picked).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Literal
from zoneinfo import ZoneInfo

from analytics.errors import ConfigError


def iso_utc(ts_ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC: seconds, milliseconds only when there are some.

    The one formatter of times as text (links, tables, JSON, messages, PromQL ranges). A time no
    calendar holds (a stray year-10000 sample being refused) reads as its year instead.

    >>> iso_utc(0), iso_utc(90_500), iso_utc(253_402_300_800_000)
    ('1970-01-01T00:00:00Z', '1970-01-01T00:01:30.500Z', 'year 10000')
    """
    try:
        dt = datetime.fromtimestamp(ts_ms // 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"year {1970 + ts_ms / 31_556_952_000:.0f}"
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ts_ms % 1000:03d}Z" if ts_ms % 1000 else "Z")


# An epoch number's unit by its size: above 1e11 seconds is past the year 5000, so a number that
# large is milliseconds; above 1e14 milliseconds (year 5138) it is microseconds, above 1e17
# microseconds nanoseconds. Every plausible time (1973 to 5138) reads the same in each unit.
_EPOCH_S_MAX = 1e11
_EPOCH_MS_MAX = 1e14
_EPOCH_US_MAX = 1e17
EpochUnit = Literal["s", "ms", "us", "ns"]
# Milliseconds in one of each unit: an epoch number times this is epoch milliseconds.
EPOCH_UNIT_MS: dict[str, float] = {"s": 1000.0, "ms": 1.0, "us": 1e-3, "ns": 1e-6}
_OFFSET = re.compile(r"^\s*(?:now\s*)?([+-])\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
# The instants a typed time may name: the years a calendar (datetime, ISO-8601) holds, 1 to 9999.
# Beyond them a time is a typo (now+9999999999999999999999d), and the store's 64-bit times refused it
# with a DuckDB error.
TIME_MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
TIME_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _in_calendar(ms: float, what: str, text: str) -> int:
    """``ms`` as an int when a calendar holds it; ConfigError naming ``what`` otherwise."""
    if not (math.isfinite(ms) and TIME_MIN_MS <= ms <= TIME_MAX_MS):
        raise ConfigError(f"{what} {text[:80]!r}: no time between the years 1 and 9999; write ISO-8601 "
                          "(2026-01-05T09:30Z), epoch seconds, now, or now-2h")
    return int(ms)


def epoch_unit(magnitude: float) -> EpochUnit:
    """The one rule for the unit of an epoch number whose file does not say it (a long CSV's,
    Parquet's, a mapped table's or a request log's time column): seconds, milliseconds,
    microseconds or nanoseconds, by its size. ``magnitude`` is the reader's largest (or first)
    time; its sign is ignored, and a NaN reads as seconds.

    >>> [epoch_unit(x) for x in (1767225600, 1767225600000, 1767225600000000, 1767225600000000000)]
    ['s', 'ms', 'us', 'ns']
    >>> epoch_unit(-1767225600000000), 1767225600000000 * EPOCH_UNIT_MS["us"]
    ('us', 1767225600000.0)
    """
    m = abs(magnitude)
    return "ns" if m > _EPOCH_US_MAX else "us" if m > _EPOCH_MS_MAX else "ms" if m > _EPOCH_S_MAX else "s"


def parse_time_ms(text: str, *, now_ms: int | None = None, what: str = "time") -> int:
    """The one parser of an instant as people type it (every flag, form, link and setting):
    ISO-8601 (``Z``, an offset, or none meaning UTC), epoch seconds (a bare number), ``now``,
    or an offset from now (``now-2h``, ``-7d``, ``now+1d``). A bare number too large for
    seconds is refused with what to write (it is milliseconds).

    Raises :class:`analytics.errors.ConfigError` naming ``what`` and the text.

    >>> parse_time_ms("2026-01-01T00:00:00Z"), parse_time_ms("1767225600")
    (1767225600000, 1767225600000)
    >>> parse_time_ms("1970-01-01T01:01+01:00"), parse_time_ms("1970-01-01T00:01")
    (60000, 60000)
    >>> parse_time_ms("now-1h", now_ms=7_200_000), parse_time_ms("-30m", now_ms=7_200_000)
    (3600000, 5400000)
    >>> parse_time_ms("now+1d", now_ms=0)
    86400000
    >>> parse_time_ms("now+9999999999999999999999d")
    Traceback (most recent call last):
    ...
    analytics.errors.ConfigError: time 'now+9999999999999999999999d': no time between the years 1 and 9999; write ISO-8601 (2026-01-05T09:30Z), epoch seconds, now, or now-2h
    """
    t = str(text).strip()
    if t == "now" or _OFFSET.match(t):
        import time

        now = int(time.time() * 1000) if now_ms is None else int(now_ms)
        m = _OFFSET.match(t)
        if m is None:
            return now
        ms = float(m.group(2)) * _UNIT_MS[m.group(3)]
        return _in_calendar(round(now + ms if m.group(1) == "+" else now - ms) if math.isfinite(ms) else ms,
                            what, t)
    try:
        num = float(t)
    except ValueError:
        num = None
    if num is not None:
        if not math.isfinite(num) or abs(num) >= _EPOCH_S_MAX:
            raise ConfigError(f"{what} {t!r}: a bare number is epoch seconds, and this one is no "
                              "time in seconds (milliseconds? divide by 1000), or write ISO-8601 "
                              "such as 2026-01-05T09:30Z")
        return round(num * 1000)
    try:
        dt = parse_iso(t)
    except ValueError:
        raise ConfigError(f"{what} {t[:80]!r}: write ISO-8601 (2026-01-05T09:30Z), epoch seconds, "
                          "now, or now-2h") from None
    return int(round(dt.timestamp() * 1000))


def parse_iso(text: str, tz: str = "UTC") -> datetime:
    """ISO-8601 text as an aware datetime: its own offset (``Z`` too), else wall-clock time in
    ``tz``. Raises ``ValueError`` for text that is not ISO-8601 (settings and files written by
    the project; what people type goes through :func:`parse_time_ms`).

    >>> parse_iso("2026-01-05T09:30Z").isoformat(), parse_iso("2026-01-05T09:30", "Asia/Shanghai").isoformat()
    ('2026-01-05T09:30:00+00:00', '2026-01-05T09:30:00+08:00')
    """
    dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc if tz == "UTC" else ZoneInfo(tz))
    return dt


def step_start_ms(ts_ms: Any, step_ms: int) -> Any:
    """A step's start: a timeline's timestamp is its step's end (the store's convention, every
    timeline and the what-if alike), so a step starts one step earlier. Ints and arrays alike.

    >>> import numpy as np
    >>> step_start_ms(120_000, 60_000), step_start_ms(np.array([60_000, 120_000]), 60_000).tolist()
    (60000, [0, 60000])
    """
    return ts_ms - step_ms


def utc_hour(ts_ms: Any) -> Any:
    """Hour of the UTC day (a float) of an instant or an array of them, epoch milliseconds.

    >>> import numpy as np
    >>> utc_hour(90 * 60_000), utc_hour(np.array([0, 86_400_000 + 1_800_000])).tolist()
    (1.5, [0.0, 0.5])
    """
    return ((ts_ms // 1000) % 86400) / 3600.0


def utc_weekday(ts_ms: Any) -> Any:
    """Day of the week (Monday 0 ... Sunday 6) of the UTC day an instant falls in, epoch
    milliseconds; ints and arrays alike (1970-01-01 was a Thursday).

    >>> import numpy as np
    >>> utc_weekday(0), utc_weekday(np.array([2 * 86_400_000, 4 * 86_400_000 - 1])).tolist()
    (3, [5, 6])
    """
    return (ts_ms // 86_400_000 + 3) % 7


def local_naive(ts_ms: int, tz: str) -> datetime:
    """Epoch milliseconds as a zone-less wall-clock time in ``tz`` (what a slider shows).

    >>> local_naive(0, "Europe/Berlin")
    datetime.datetime(1970, 1, 1, 1, 0)
    """
    zone = timezone.utc if tz == "UTC" else ZoneInfo(tz)
    return datetime.fromtimestamp(ts_ms / 1000, tz=zone).replace(tzinfo=None)


def from_local_naive(dt: datetime, tz: str) -> int:
    """Inverse of :func:`local_naive`: a wall-clock time in ``tz`` as epoch milliseconds.

    >>> from_local_naive(datetime(1970, 1, 1, 1, 0), "Europe/Berlin")
    0
    """
    zone = timezone.utc if tz == "UTC" else ZoneInfo(tz)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone)
    return int(round(dt.timestamp() * 1000))


def format_time(ts_ms: int, tz: str) -> str:
    """One instant as the pages' tables show it, in zone ``tz`` (the zone said beside it).

    >>> format_time(0, "UTC"), format_time(0, "Europe/Berlin")
    ('1970-01-01 00:00', '1970-01-01 01:00')
    """
    return f"{local_naive(ts_ms, tz):%Y-%m-%d %H:%M}"


def format_span(start_ms: int, end_ms: int, tz: str) -> str:
    """A range as people read it in zone ``tz``: the year only when the range crosses one.

    >>> format_span(0, 86_400_000, "UTC")
    'Jan 1 00:00 → Jan 2 00:00 UTC'
    >>> format_span(1_564_308_000_000, 1_764_626_400_000, "UTC")
    'Jul 28 2019 10:00 → Dec 1 2025 22:00 UTC'
    """
    a, b = local_naive(start_ms, tz), local_naive(end_ms, tz)
    fmt = "%b %-d %H:%M" if a.year == b.year else "%b %-d %Y %H:%M"
    return f"{a:{fmt}} → {b:{fmt}} {tz}"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
# The longest step (a timeline's, a rhythm's resolution, the rules' evaluation interval): a day. A
# longer one is a typo, and `--interval 99999999999999d` hung the rules' export in a loop over it.
STEP_MAX_S = 86_400


def parse_step_s(text: str, what: str = "step") -> int:
    """A step like ``30s``, ``1m``, ``5m``, ``1h`` (bare numbers are seconds) in whole seconds.

    >>> parse_step_s("1m"), parse_step_s("90"), parse_step_s("1h")
    (60, 90, 3600)

    Raises :class:`ConfigError` naming ``what`` (the flag) for text that is not a duration, or
    not whole seconds from 1s to a day (:data:`STEP_MAX_S`).
    """
    m = _DURATION.match(str(text))
    if not m:
        raise ConfigError(f"{what} {str(text)[:80]!r} is not a duration: write e.g. 30s, 1m, 5m or 1h")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if not 1 <= seconds <= STEP_MAX_S or seconds != int(seconds):
        raise ConfigError(f"{what} {str(text)[:80]!r} must be a whole number of seconds from 1s to 1d")
    return int(seconds)
