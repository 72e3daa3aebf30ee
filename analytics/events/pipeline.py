"""Store-level entry points: the timelines for a range, then the events found and attributed.

The timelines (and the store facts read with them) come from their one owner,
:func:`analytics.timeline.store_timelines`; after that pass nothing here reads the store again:
the notes on how exactly events could be judged come from the timelines' facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from analytics.events.analysis import EventsAnalysis, analyse, detected_ids
from analytics.events.buckets import slo_bucket_notes
from analytics.events.config import EventsConfig
from analytics.timeline import Timelines, store_timelines
from analytics.timeline.cache import timelines_origin
from analytics.timeline.provenance import latency_source_notes

if TYPE_CHECKING:
    from analytics.slo import SloTable
    from analytics.store import Store
    from analytics.timeline.facts import TimelineFacts
    from analytics.workloads import WorkloadMap


def analyse_store(store: "Store", cfg: EventsConfig | None = None, wmap: "WorkloadMap | None" = None,
                  incidents: pl.DataFrame | None = None, *,
                  slos: "SloTable | None" = None) -> EventsAnalysis:
    """Timelines from the store, then :func:`analytics.events.analyse` on them.

    Parameters
    ----------
    slos:
        The :class:`analytics.slo.SloTable` that decides every service's p99 SLO (the app and
        the CLI pass the same: the same events, the same ids). A service it gives none is judged
        by the relative rule (``cfg.relative_k``).
    """
    cfg = cfg or EventsConfig()
    found = computed_events(store, cfg, wmap, incidents, slos=slos)
    if found is not None:  # computed before: the timelines are not read
        return found
    return analyse_timelines(store_timelines(store, cfg.timeline_config(), wmap), cfg, incidents, slos=slos)


def computed_events(store: "Store", cfg: EventsConfig, wmap: "WorkloadMap | None" = None,
                    incidents: pl.DataFrame | None = None, *,
                    slos: "SloTable | None" = None) -> EventsAnalysis | None:
    """The events analysis of these settings where the result cache has it (under
    :func:`analyse_timelines`' key), else ``None``: a warm command reads its answer without the
    timelines it was computed from."""
    origin = timelines_origin(store, cfg.timeline_config(), wmap)
    return origin.peek("events", (cfg, slos, incidents)) if origin is not None else None  # type: ignore[no-any-return]


def analyse_timelines(timelines: Timelines, cfg: EventsConfig, incidents: pl.DataFrame | None = None, *,
                      slos: "SloTable | None" = None) -> EventsAnalysis:
    """:func:`analytics.events.analyse` on timelines already built (the app's shared ones, or
    :func:`analyse_store`'s), with the notes their facts add (:func:`facts_notes`): the one call
    the Tail events page, the review and ``tidelens events`` make. The store is not read; the
    result is computed once per timelines and settings (:meth:`Timelines.remembered`) and shared,
    never to be changed in place."""

    def build() -> EventsAnalysis:
        result = analyse(timelines.services, timelines.pool, timelines.holdings, cfg=cfg,
                         slos=slos, incidents=incidents)
        facts = timelines.facts
        if facts is not None:
            result.notes.extend(facts_notes(facts, timelines.services, result.slos_ms))
            result.map_digest = facts.map_digest  # which map classed the GPUs (the audit record's)
        return result

    # Once per timelines and settings, whichever surface asks first (analytics.resultcache).
    return timelines.remembered("events", (cfg, slos, incidents), build)


def timelines_event_ids(timelines: Timelines, cfg: EventsConfig, *,
                        slos: "SloTable | None" = None) -> set[str] | None:
    """The ids :func:`analyse_timelines` gives these timelines' events, by detection alone
    (:func:`analytics.events.analysis.detected_ids`); ``None`` where that cannot tell."""
    return detected_ids(timelines.services, cfg=cfg, slos=slos)


def facts_notes(facts: "TimelineFacts", services: pl.DataFrame, slos_ms: "dict[str, float | None]") -> list[str]:
    """How exactly the events could be judged (the page and the CLI say the same): an SLO inside a
    histogram bucket; a loaded histogram that is not one; a service whose request log wins over its
    histogram; a service whose traffic is its rate gauge."""

    notes = slo_bucket_notes(facts.bucket_bounds_ms, services, slos_ms)
    notes.extend(facts.histogram_defects)
    if facts.request_logs is not None and services["slo_metric"].str.starts_with("requests.").any():
        notes.extend(latency_source_notes(facts.request_logs))
    notes.extend(facts.traffic_notes)
    return notes
