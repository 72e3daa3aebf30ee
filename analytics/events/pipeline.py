"""Store-level entry points: build the timelines for a range, then find and attribute events.

Timelines of a store file are kept in a small in-process cache keyed by the file, its loaded
sources (ids, content hashes, counts, load times) and the step, range and workload map: the
``events`` and ``report`` commands, a notebook or a test asking twice about the same store pay
for the timelines once. Loading anything new changes the sources and so the key; ``:memory:``
stores are never cached (no file identifies them).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import polars as pl

from analytics.events.analysis import EventsAnalysis, analyse
from analytics.events.config import EventsConfig

if TYPE_CHECKING:
    from analytics.slo import SloTable
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

_CACHE_SIZE = 4
_cache: "OrderedDict[tuple[Any, ...], dict[str, pl.DataFrame]]" = OrderedDict()


def _cache_key(store: "Store", cfg: EventsConfig, wmap: "WorkloadMap | None") -> tuple[Any, ...] | None:
    if store.path == ":memory:":
        return None
    src = store.sources()
    sources = tuple(src.select("id", "content_hash", "status", "samples", pl.col("loaded_at").cast(pl.Utf8)).rows())
    return (os.path.realpath(store.path), sources, cfg.step_s, cfg.start_ms, cfg.end_ms, repr(wmap))


def _build_timelines(store: "Store", cfg: EventsConfig, wmap: "WorkloadMap | None") -> dict[str, pl.DataFrame]:
    from analytics.timeline import TimelineConfig

    tcfg = TimelineConfig(step_s=cfg.step_s, start_ms=cfg.start_ms, end_ms=cfg.end_ms)
    from analytics.timeline import timelines  # one pass over the device samples

    return timelines(store, tcfg, wmap).as_dict()


def timelines_for(store: "Store", cfg: EventsConfig, wmap: "WorkloadMap | None" = None) -> dict[str, pl.DataFrame]:
    """``{"services", "pool", "holdings"}`` at the config's step and range (cached per store file)."""
    key = _cache_key(store, cfg, wmap)
    if key is not None and key in _cache:
        _cache.move_to_end(key)
        return dict(_cache[key])
    out = _build_timelines(store, cfg, wmap)
    if key is not None:
        _cache[key] = dict(out)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return out


def analyse_store(store: "Store", cfg: EventsConfig | None = None, wmap: "WorkloadMap | None" = None,
                  incidents: pl.DataFrame | None = None, *,
                  slos_ms: "dict[str, float | None] | SloTable | None" = None) -> EventsAnalysis:
    """Timelines from the store, then :func:`analytics.events.analyse` on them.

    Parameters
    ----------
    slos_ms:
        p99 SLO per service, or the :class:`analytics.slo.SloTable` that decides every service's
        (what the app and the CLI pass: the same events, the same ids); ``cfg.slo_ms`` overrides
        every service. A service with none in a plain dict is judged by the relative rule
        (``cfg.relative_k``).
    """
    from analytics.slo import SloTable

    cfg = cfg or EventsConfig()
    tl = timelines_for(store, cfg, wmap)
    if isinstance(slos_ms, SloTable):
        slos_ms = slos_ms.for_services(tl["services"]["service"].unique().to_list())
    return analyse_timelines(store, tl, cfg, wmap, incidents, slos_ms=slos_ms)


def analyse_timelines(store: "Store", timelines: "dict[str, pl.DataFrame]", cfg: EventsConfig,
                      wmap: "WorkloadMap | None" = None, incidents: pl.DataFrame | None = None, *,
                      slos_ms: "dict[str, float | None] | None" = None) -> EventsAnalysis:
    """:func:`analytics.events.analyse` on timelines already built (the app's shared ones, or
    :func:`analyse_store`'s), with the notes the store adds (:func:`store_notes`): the one call
    the Tail events page and ``tidelens events`` make."""
    result = analyse(timelines["services"], timelines["pool"], timelines["holdings"], cfg=cfg,
                     slos_ms=slos_ms, incidents=incidents)
    result.notes.extend(store_notes(store, timelines["services"], result.slos_ms, wmap))
    from analytics.workloads import WorkloadMap, map_digest

    result.map_digest = map_digest(wmap or WorkloadMap())  # which map classed the GPUs (audit record)
    return result


def histogram_defect_notes(store: "Store") -> list[str]:
    """The load notes of sources holding a histogram that is not one (no ``+Inf``, decreasing
    buckets, count != ``+Inf``): percentiles computed from them are shown with this warning."""
    from analytics.ingest.om_check import HISTOGRAM_DEFECT
    from analytics.sql import store as sq

    rows = store.query(sq.SOURCE_NOTES_WITH, {"phrase": HISTOGRAM_DEFECT}).rows()
    out = []
    for name, note in rows:
        part = next(p for p in note.split("; ") if HISTOGRAM_DEFECT in p)
        out.append(f"{name}: {part}")
    return out


def store_notes(store: "Store", services: pl.DataFrame, slos_ms: "dict[str, float | None]",
                wmap: "WorkloadMap | None" = None) -> list[str]:
    """What the store says of how exactly the events could be judged (the page and the CLI add the
    same): an SLO inside a histogram bucket; a loaded histogram that is not one; a service whose
    request log wins over its histogram; a service whose traffic is its rate gauge."""
    from analytics.events.slo import slo_bucket_notes

    notes = slo_bucket_notes(store, services, slos_ms)
    notes.extend(histogram_defect_notes(store))
    if store.has_requests() and services["slo_metric"].str.starts_with("requests.").any():
        from analytics.timeline.sources import latency_source_notes, request_log_summary

        notes.extend(latency_source_notes(request_log_summary(store, wmap)))
    from analytics.timeline.sources import traffic_source_notes

    notes.extend(traffic_source_notes(store, wmap))
    return notes

