"""What the timeline pass learns of a store beside its frames, so no analysis reopens the store.

Tail events says which histogram bucket holds each SLO, which loaded histograms are defective,
which services' latency comes from a request log and whose traffic is a rate gauge; the What-if
names the GPU model; the Overview says how GPUs without a pod label were classed. All of it is read here, once, in the same pass that builds the timelines
(:func:`analytics.timeline.timelines`), and travels with them through every cache: the notes a
page shows are those of the data its numbers came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from analytics.ingest.om_check import HISTOGRAM_DEFECT
from analytics.sql import rhythm as rhq
from analytics.sql import store as sq
from analytics.sql.whatif import GPU_MODELS
from analytics.timeline.pool import class_rules
from analytics.timeline.provenance import request_log_summary, traffic_source_notes
from analytics.timeline.service import RATE, ms_per_unit
from analytics.workloads import map_digest

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap


@dataclass(frozen=True)
class TimelineFacts:
    """The store's facts the analyses need beside the timeline frames.

    Attributes
    ----------
    bucket_bounds_ms:
        Histogram name -> its finite bucket bounds in milliseconds (each service's SLO histogram).
    request_logs:
        :func:`analytics.timeline.provenance.request_log_summary` of the store.
    traffic_notes:
        :func:`analytics.timeline.provenance.traffic_source_notes` of the store.
    histogram_defects:
        One line per loaded source whose histogram is not one (``name: what is wrong``).
    gpu_models:
        ``(modelName, GPUs)`` pairs, most GPUs first (``analytics.sql.whatif.GPU_MODELS``).
    map_digest:
        The digest of the workload map the timelines were classed with (``analytics.workloads.map_digest``:
        what the audit record, the events and the review name).
    service_gauge_metrics:
        Request-rate gauges whose every series is some service's traffic (the Rhythm shows them as
        that service's ``rps:`` signal, not as a second ``metric:`` one).
    class_rules:
        How each exporter's GPUs without a pod label were classed
        (:func:`analytics.timeline.class_rules`: the Overview's and the review's caption).
    """

    bucket_bounds_ms: dict[str, tuple[float, ...]] = field(default_factory=dict)
    request_logs: pl.DataFrame | None = None
    traffic_notes: tuple[str, ...] = ()
    histogram_defects: tuple[str, ...] = ()
    gpu_models: tuple[tuple[str, int], ...] = ()
    class_rules: pl.DataFrame | None = None
    map_digest: str = ""
    service_gauge_metrics: tuple[str, ...] = ()


def bucket_bounds_ms(series: pl.DataFrame) -> dict[str, tuple[float, ...]]:
    """Histogram name -> its finite ``le`` bounds in ms, from :func:`service_series` output.

    >>> s = pl.DataFrame({"base": ["h_seconds"] * 3, "role": ["bucket"] * 3, "le": [0.1, 0.25, float("inf")]})
    >>> bucket_bounds_ms(s)
    {'h_seconds': (100.0, 250.0)}
    """

    if series.height == 0 or "le" not in series.columns:
        return {}
    buckets = (series.filter((pl.col("role") == "bucket") & pl.col("le").is_not_null() & pl.col("le").is_finite())
               .group_by("base").agg(pl.col("le").unique().sort()))
    return {base: tuple(float(x) * ms_per_unit(base) for x in les) for base, les in sorted(buckets.rows())}


def service_gauge_metrics(series: pl.DataFrame, store: "Store") -> tuple[str, ...]:
    """Rate metrics all of whose series :func:`service_series` gave a service (``series``: its output)."""

    if series.height == 0:
        return ()
    counts = dict(store.query(rhq.RATE_METRICS).rows())  # metric -> its series
    mine = series.filter(pl.col("role") == RATE).group_by("metric").agg(pl.col("series_id").n_unique())
    return tuple(sorted(m for m, n in mine.rows() if counts.get(m) == n))


def histogram_defect_lines(store: "Store") -> tuple[str, ...]:
    """The load notes of sources holding a histogram that is not one (no ``+Inf``, decreasing
    buckets, count != ``+Inf``): percentiles computed from them are shown with this warning."""

    rows = store.query(sq.SOURCE_NOTES_WITH, {"phrase": HISTOGRAM_DEFECT}).rows()
    return tuple(f"{name}: {next(p for p in note.split('; ') if HISTOGRAM_DEFECT in p)}" for name, note in rows)


def gather_facts(store: "Store", wmap: "WorkloadMap", resolved: tuple[pl.DataFrame, pl.DataFrame]) -> TimelineFacts:
    """The facts of ``store``, reusing the pass's resolved ``(series, services)``."""

    logs = request_log_summary(store, wmap, resolved) if store.has_requests() else None
    models = tuple((str(m), int(n)) for m, n in store.query(GPU_MODELS).select("model", "gpus").rows())
    return TimelineFacts(bucket_bounds_ms=bucket_bounds_ms(resolved[0]), request_logs=logs,
                         traffic_notes=tuple(traffic_source_notes(store, wmap, resolved)),
                         histogram_defects=histogram_defect_lines(store), gpu_models=models,
                         class_rules=class_rules(store), map_digest=map_digest(wmap),
                         service_gauge_metrics=service_gauge_metrics(resolved[0], store))
