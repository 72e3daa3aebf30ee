"""Durations as users type them on the command line and in forms (instants: :func:`analytics.times.parse_time_ms`)."""

from __future__ import annotations

import re

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
