"""The one place the forecast reads timelines: their owner's cache, and the part a moment may know.

A forecast made at a moment knows the steps that ended by then, nothing after: every part of
the package reads the typed :class:`analytics.timeline.Timelines` (``pool``, ``holdings``,
``services``, ``facts``) on a cut made by :func:`known_at`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.timeline import TimelineConfig, Timelines, slice_timelines, store_timelines

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

DAY_MS = 86_400_000


def store_frames(store: "Store", step_s: int = 60, wmap: "WorkloadMap | None" = None) -> Timelines:
    """The store's whole span of timelines, from their one owner (built once per store, step and map)."""
    return store_timelines(store, TimelineConfig(step_s=step_s), wmap)


def known_at(tl: Timelines, step_s: int, at_ms: int, days: float | None = None) -> Timelines:
    """The steps that ended by ``at_ms`` (the last ``days`` of them, or all), cut from ``tl``."""
    start = None if days is None else int(at_ms - days * DAY_MS) + 1
    return slice_timelines(tl, step_s, start, at_ms)


def span_ms(tl: Timelines) -> tuple[int, int] | None:
    """The first and last step ends (epoch ms) of the service timeline; None when it is empty."""
    if tl.services.height == 0:
        return None
    ts = tl.services["ts"].dt.epoch("ms")
    return int(ts.min()), int(ts.max())
