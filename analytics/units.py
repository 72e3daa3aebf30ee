"""Numbers as a meeting reads them: money, minutes, GPUs, GPU-hours, shares, hours of the day.

One place decides how a quantity is written, so the pages, the reports and the CLI's tables
say the same number the same way: ``$9,830`` (never ``4371.1479``), ``87 min`` (never
``87.423``), ``01:58`` for an hour of the day (never ``01:00`` for a truncated one, never
``1.97``). A value that is missing (``None``, NaN) reads ``n/a``.

>>> money(4371.1479), minutes_text(87.423), hour_text(1.97), share_text(0.974852)
('$4,371', '87 min', '01:58', '97%')
>>> number_text(4371.1479), number_text(0.974852), number_text(20000), number_text(None)
('4,371', '0.975', '20,000', '')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Number
from typing import Any

MISSING = "n/a"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def number_text(x: Any) -> str:
    """A table cell's number: thousands grouped, whole above 100, three significant digits below.

    >>> [number_text(v) for v in (1033.0, 87.423, 2.5, 0.0, -12345.6, True, float("nan"))]
    ['1,033', '87.4', '2.5', '0', '-12,346', 'True', 'n/a']
    """
    if x is None:
        return ""
    if isinstance(x, bool) or not isinstance(x, Number):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    value = float(x)  # type: ignore[arg-type]
    if not math.isfinite(value):
        return MISSING
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value else "0"


def column_text(values: Sequence[Any]) -> list[str]:
    """A table column's numbers, one precision for the column (its largest value decides, as
    :func:`number_text` does for one): the decimals line up.

    >>> column_text([0.974852, 0.99, None]), column_text([87.423, 3.0]), column_text([4371.1, 12.0])
    (['0.975', '0.990', ''], ['87.4', '3.0'], ['4,371', '12'])
    >>> column_text([1, 20000]), column_text([float("nan"), 2.0])
    (['1', '20,000'], ['n/a', '2.0'])
    """
    finite = [abs(float(x)) for x in values if isinstance(x, Number) and not isinstance(x, bool)
              and math.isfinite(float(x))]  # type: ignore[arg-type]
    if all(isinstance(x, int) or x is None for x in values):
        return [number_text(x) for x in values]
    top = max(finite, default=0.0)
    decimals = 0 if top >= 100 else 1 if top >= 1 else 3

    def one(x: Any) -> str:
        if x is None or isinstance(x, bool) or not isinstance(x, Number):
            return "" if x is None else str(x)
        value = float(x)  # type: ignore[arg-type]
        return f"{value:,.{decimals}f}" if math.isfinite(value) else MISSING

    return [one(x) for x in values]


def money(x: Any) -> str:
    """Dollars, whole: ``$9,830``; a negative amount ``-$12``.

    >>> money(9830.4), money(-12.2), money(None)
    ('$9,830', '-$12', 'n/a')
    """
    if _missing(x):
        return MISSING
    value = round(float(x))
    return f"-${-value:,}" if value < 0 else f"${value:,}"


def minutes_text(x: Any) -> str:
    """Minutes, whole: ``244 min`` (under one, ``<1 min``; none, ``0 min``).

    >>> minutes_text(244.4), minutes_text(0.2), minutes_text(0)
    ('244 min', '<1 min', '0 min')
    """
    if _missing(x):
        return MISSING
    value = float(x)
    if 0 < value < 0.5:
        return "<1 min"
    return f"{value:,.0f} min"


def duration_text(minutes: Any) -> str:
    """A duration as people say it: minutes under two hours, else hours with one decimal.

    >>> duration_text(45), duration_text(553.98), duration_text(120), duration_text(None)
    ('45 min', '9.2 h', '2 h', 'n/a')
    """
    if _missing(minutes):
        return MISSING
    value = float(minutes)
    return minutes_text(value) if value < 120 else f"{value / 60:,.1f}".removesuffix(".0") + " h"


def span_text(hours: Any) -> str:
    """The length of a range: ``7 days``, ``1 day``, ``2.5 days``, ``12 h``.

    >>> span_text(168), span_text(24.0), span_text(60), span_text(12), span_text(None)
    ('7 days', '1 day', '2.5 days', '12 h', 'n/a')
    """
    if _missing(hours):
        return MISSING
    value = float(hours)
    if value < 24:
        return f"{value:,.0f} h"
    days = f"{value / 24:,.1f}".removesuffix(".0")
    return f"{days} day" + ("" if days == "1" else "s")


def gpus_text(x: Any) -> str:
    """GPUs: whole when whole, else one decimal (a mean): ``64 GPUs``, ``0.1 GPUs``, ``1 GPU``.

    >>> gpus_text(64), gpus_text(0.143), gpus_text(1.0)
    ('64 GPUs', '0.1 GPUs', '1 GPU')
    """
    if _missing(x):
        return MISSING
    value = float(x)
    shown = f"{value:,.0f}" if abs(value - round(value)) < 0.05 else f"{value:,.1f}"
    return f"{shown} GPU" + ("" if shown == "1" else "s")


def _measured(x: Any, unit: str) -> str:
    """``x`` with its unit: whole from ten, one decimal below (a small value keeps its size)."""
    if _missing(x):
        return MISSING
    value = float(x)
    return f"{value:,.0f} {unit}" if abs(value) >= 10 else f"{value:.1f} {unit}"


def gpu_hours_text(x: Any) -> str:
    """GPU-hours: ``1,204 GPU-h``, ``0.3 GPU-h``.

    >>> gpu_hours_text(1204.4), gpu_hours_text(0.3)
    ('1,204 GPU-h', '0.3 GPU-h')
    """
    return _measured(x, "GPU-h")


def share_text(x: Any) -> str:
    """A share (0..1) as a whole percentage.

    >>> share_text(0.974852), share_text(None)
    ('97%', 'n/a')
    """
    return MISSING if _missing(x) else f"{float(x):.0%}"


def ms_text(x: Any) -> str:
    """Milliseconds of latency: ``1,204 ms``, ``4.6 ms``.

    >>> ms_text(1204.4), ms_text(4.56)
    ('1,204 ms', '4.6 ms')
    """
    return _measured(x, "ms")


def rps_text(x: Any) -> str:
    """Requests per second: ``49 req/s``, ``3.1 req/s``.

    >>> rps_text(49.21), rps_text(3.14)
    ('49 req/s', '3.1 req/s')
    """
    return _measured(x, "req/s")


def hour_text(hour: Any) -> str:
    """An hour of the day as a clock reads it, to the minute (rounded, never truncated).

    >>> hour_text(9.0), hour_text(22.25), hour_text(7.5 + 24), hour_text(1.97), hour_text(23.999)
    ('09:00', '22:15', '07:30', '01:58', '00:00')
    """
    if _missing(hour):
        return MISSING
    minutes = int(round((float(hour) % 24) * 60)) % 1440
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def hour_window_text(start_hour: Any, end_hour: Any) -> str:
    """Hours of the day ``[start, end)`` as a clock reads them (may cross midnight).

    >>> hour_window_text(22, 6), hour_window_text(None, 6)
    ('22:00-06:00', 'n/a')
    """
    if _missing(start_hour) or _missing(end_hour):
        return MISSING
    return f"{hour_text(start_hour)}-{hour_text(end_hour)}"
