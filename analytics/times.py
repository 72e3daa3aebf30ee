"""Time as text: the one ISO-8601 UTC formatter and parser, and wall-clock times in a zone.

Every time Tidelens writes as text goes through :func:`iso_utc` (a link's range, a table's
``from``/``to``, an event's start in JSON, a message, a PromQL range), so the app, the CLI and a
report print one instant the same way; :func:`local_naive` is the display side (a slider's
wall clock in the zone the user picked).
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo


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


def parse_iso_ms(text: str) -> int:
    """Parse ISO-8601 (``Z``, an offset, or naive meaning UTC) or epoch milliseconds.

    >>> parse_iso_ms("1970-01-01T00:01Z"), parse_iso_ms("1970-01-01T01:01+01:00"), parse_iso_ms("60000")
    (60000, 60000, 60000)
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(round(dt.timestamp() * 1000))


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
