"""How exactly a p99 check against an SLO can be made on a latency histogram.

An SLO is checked exactly only on a bound of the latency histogram's buckets: there "p99 above
the SLO" means "more than 1% of the step's requests took longer". Inside a bucket the check rests
on ``histogram_quantile``'s linear interpolation and is known only to within that bucket (the
DESIGN.md tolerance), which :func:`slo_bucket_note` tells the user. Which SLO a service has is
:mod:`analytics.slo`'s to decide.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import polars as pl


def slo_bucket_note(service: str, slo_ms: float, metric: str, bounds_ms: Sequence[float]) -> str | None:
    """A note when ``slo_ms`` lies strictly inside a bucket of ``metric`` (``None`` on a bound).

    Examples
    --------
    >>> slo_bucket_note("web", 100.0, "h_seconds", [50.0, 100.0, 150.0]) is None
    True
    >>> "(100, 150] ms" in slo_bucket_note("web", 120.0, "h_seconds", [50.0, 100.0, 150.0])
    True
    """
    b = sorted(x for x in bounds_ms if math.isfinite(x))
    if not b or any(math.isclose(slo_ms, x, rel_tol=1e-9) for x in b):
        return None
    lo = max((x for x in b if x < slo_ms), default=0.0)
    hi = min((x for x in b if x > slo_ms), default=math.inf)
    if not math.isfinite(hi):
        return (f"{service}: SLO {slo_ms:g} ms is above the highest finite bucket bound of {metric} "
                f"({lo:g} ms): histogram_quantile never reports more than that bound, so no step can break the SLO")
    return (f"{service}: SLO {slo_ms:g} ms lies inside the ({lo:g}, {hi:g}] ms bucket of {metric}: whether p99 "
            f"is above it is interpolated linearly inside that bucket and known only to within it; an SLO on "
            f"a bucket bound ({lo:g} or {hi:g} ms) is checked exactly")


def slo_bucket_notes(bounds_ms: "Mapping[str, Sequence[float]]", services: pl.DataFrame,
                     slos_ms: dict[str, float | None]) -> list[str]:
    """:func:`slo_bucket_note` for every service whose SLO histogram has bucket bounds.

    ``bounds_ms``: histogram -> its finite bounds in ms (the timelines' facts,
    :func:`analytics.timeline.facts.bucket_bounds_ms`); ``services`` is the service timeline (its
    ``slo_metric`` names each service's histogram).
    """
    if "slo_metric" not in services.columns:
        return []
    notes = []
    pairs = services.select(pl.col("service").cast(pl.Utf8), pl.col("slo_metric").cast(pl.Utf8)).unique()
    for service, metric in sorted(pairs.drop_nulls().rows()):
        slo = slos_ms.get(service)
        if slo is None or metric not in bounds_ms:
            continue
        note = slo_bucket_note(service, float(slo), metric, bounds_ms[metric])
        if note:
            notes.append(note)
    return notes
