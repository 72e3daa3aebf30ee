"""Store-level entry points: build the timelines for a range, then find and attribute events."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from analytics.events.analysis import EventsAnalysis, analyse
from analytics.events.config import EventsConfig
from analytics.events.event import Event

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap


def timelines_for(store: "Store", cfg: EventsConfig, wmap: "WorkloadMap | None" = None) -> dict[str, pl.DataFrame]:
    """``{"services", "pool", "holdings"}`` at the config's step and range."""
    from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline

    tcfg = TimelineConfig(step_s=cfg.step_s, start_ms=cfg.start_ms, end_ms=cfg.end_ms)
    return {"services": service_timeline(store, tcfg, wmap), "pool": pool_timeline(store, tcfg, wmap),
            "holdings": holdings(store, tcfg, wmap)}


def analyse_store(store: "Store", cfg: EventsConfig | None = None, wmap: "WorkloadMap | None" = None,
                  incidents: pl.DataFrame | None = None, *,
                  slos_ms: dict[str, float | None] | None = None) -> EventsAnalysis:
    """Timelines from the store, then :func:`analytics.events.analyse` on them.

    Parameters
    ----------
    slos_ms:
        p99 SLO per service; ``cfg.slo_ms`` overrides every service. A service with neither is
        judged by the relative rule (``cfg.relative_k``).
    """
    cfg = cfg or EventsConfig()
    tl = timelines_for(store, cfg, wmap)
    return analyse(tl["services"], tl["pool"], tl["holdings"], cfg=cfg, slos_ms=slos_ms, incidents=incidents)


def find_events(store: "Store", cfg: EventsConfig | None = None, wmap: "WorkloadMap | None" = None,
                incidents: pl.DataFrame | None = None, *,
                slos_ms: dict[str, float | None] | None = None) -> list[Event]:
    """The attributed tail events of the store's range (see :func:`analyse_store`)."""
    return analyse_store(store, cfg, wmap, incidents, slos_ms=slos_ms).events
