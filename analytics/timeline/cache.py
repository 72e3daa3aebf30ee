"""The one owner of built timelines: :func:`timelines` through the one result cache.

The CLI's ``events``, ``review``, ``whatif`` and ``rhythm``, the app's pages, the capacity review,
the backtest and a notebook asking about the same store, range, step and map read the timelines
(and the store facts read with them) computed once, in this process or another
(:mod:`analytics.resultcache`: keyed by the store's loaded sources, so loading anything new
misses). ``:memory:`` stores are never cached (no file identifies them). The timelines carry
their :class:`~analytics.timeline.combined.TimelinesOrigin`, so what is computed from them (the
events, a calibration, a rhythm) is cached under the same key.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from analytics.resultcache import canonical, digest, remembered, scope_of
from analytics.timeline.combined import Timelines, TimelinesOrigin, timelines
from analytics.timeline.config import TimelineConfig

from analytics.workloads import WorkloadMap

if TYPE_CHECKING:
    from analytics.store import Store


def timelines_origin(store: "Store", cfg: TimelineConfig,
                     wmap: "WorkloadMap | None") -> TimelinesOrigin | None:
    """What identifies one store's timelines (``None`` for an in-memory store)."""
    scope = scope_of(store)
    if scope is None:
        return None
    # None is the default map (as timelines() takes it).
    return TimelinesOrigin(scope, int(cfg.step_s), cfg.start_ms, cfg.end_ms,
                           digest(canonical(wmap or WorkloadMap())))


def store_timelines(store: "Store", cfg: TimelineConfig = TimelineConfig(),
                    wmap: "WorkloadMap | None" = None) -> Timelines:
    """The :class:`Timelines` of ``store`` at ``cfg``'s step and range, built once per store
    content, range, map and code (:func:`timelines`); the frames are shared, never to be
    changed in place (polars frames are not)."""
    origin = timelines_origin(store, cfg, wmap)
    if origin is None:
        return timelines(store, cfg, wmap)
    return remembered(origin.scope, "timelines", origin,
                      lambda: dataclasses.replace(timelines(store, cfg, wmap), origin=origin))
