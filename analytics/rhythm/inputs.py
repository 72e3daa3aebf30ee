"""Which series of a store the rhythm analysis can read, and their frames ``ts, value``.

Signal names:

- ``rps:<service>``, ``p99_ms:<service>``: from the service timeline;
- ``gpus_batch:<pool>``, ``gpus_inference:<pool>``, ``activity_pct:<pool>``: from the pool timeline;
- ``metric:<name>``: a request-rate gauge loaded as such (e.g. a long CSV of a service's
  requests per second), summed over its series per step.

The timelines are the one cache's (:func:`analytics.timeline.store_timelines`), or the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.sql import rhythm as q
from analytics.store import Store
from analytics.timeline import TimelineFacts, Timelines, store_timelines
from analytics.timeline.config import TimelineConfig
from analytics.timeline.facts import service_gauge_metrics
from analytics.timeline.service import service_series
from analytics.workloads import WorkloadMap

SERVICE_COLUMNS = {"rps": "traffic", "p99_ms": "latency"}
POOL_COLUMNS = {"gpus_batch": "batch", "gpus_inference": "gpus", "activity_pct": "activity"}
KIND_LABELS = {"traffic": "requests/s", "latency": "p99 ms", "batch": "GPUs held by batch",
               "gpus": "GPUs held by inference", "activity": "GPU activity %"}


@dataclass(frozen=True)
class RhythmSignal:
    """One series the rhythm can be computed for."""

    name: str
    kind: str  # traffic | latency | batch | gpus | activity
    entity: str  # the service, pool or metric
    pool: str | None = None

    @property
    def label(self) -> str:
        return f"{self.entity}: {KIND_LABELS.get(self.kind, self.kind)}"


class SignalSource:
    """Signals of one store at one timeline step.

    Parameters
    ----------
    store:
        The store to read.
    step_s:
        Timeline step in seconds.
    wmap:
        Workload map for the timelines (``None``: defaults).
    timelines:
        The service and pool timelines of this step and range when the caller has them
        (``{"services": ..., "pool": ...}``, as :func:`analytics.timeline.timelines` gives
        them): they are used instead of reading the store again.
    """

    def __init__(self, store: Store, *, step_s: int = 60, wmap: Any = None,
                 start_ms: int | None = None, end_ms: int | None = None,
                 timelines: Timelines | None = None) -> None:
        self.store = store
        self.step_s = step_s
        self.wmap = wmap
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.problems: list[str] = []
        self._signals: list[RhythmSignal] | None = None
        self._timelines = timelines
        self._facts: TimelineFacts | None = timelines.facts if timelines is not None else None

    def _service_gauges(self) -> set[str]:
        """Rate metrics whose every series is a service's traffic (its ``rps:`` signal already)."""
        if self._facts is not None:
            return set(self._facts.service_gauge_metrics)

        return set(service_gauge_metrics(service_series(self.store, self.wmap or WorkloadMap())[0],
                                         self.store))

    def timelines(self) -> Timelines:
        """The timelines of this step and range: the caller's, else the one cache's
        (:func:`analytics.timeline.store_timelines`: one pass for the pool and the services)."""
        if self._timelines is None:
            self._timelines = store_timelines(self.store, TimelineConfig(
                step_s=self.step_s, start_ms=self.start_ms, end_ms=self.end_ms), self.wmap)
            self._facts = self._timelines.facts
        return self._timelines

    def service_timeline(self) -> pl.DataFrame:
        return self.timelines().services

    def pool_timeline(self) -> pl.DataFrame:
        return self.timelines().pool

    def signals(self) -> list[RhythmSignal]:
        """Every signal the store can give, traffic first."""
        if self._signals is not None:
            return self._signals
        out: list[RhythmSignal] = []
        svc = self.service_timeline()
        if svc.height and "service" in svc.columns:
            pools = (svc.group_by("service").agg(pl.col("pool").drop_nulls().first())
                     if "pool" in svc.columns else svc.select("service").unique().with_columns(pl.lit(None).alias("pool")))
            for service, pool in pools.sort("service").iter_rows():
                for col, kind in SERVICE_COLUMNS.items():
                    if col in svc.columns and svc.filter(pl.col("service") == service)[col].drop_nulls().len():
                        out.append(RhythmSignal(f"{col}:{service}", kind, service, pool))
        rates = self.store.query(q.RATE_METRICS)
        served = self._service_gauges() if rates.height else set()
        for metric, _n in rates.iter_rows():
            if metric not in served:  # a service's gauge is its rps: signal, not a second one
                out.append(RhythmSignal(f"metric:{metric}", "traffic", metric))
        pool_tl = self.pool_timeline()
        if pool_tl.height and "pool" in pool_tl.columns:
            for pool in sorted(pool_tl["pool"].drop_nulls().unique().to_list()):
                for col, kind in POOL_COLUMNS.items():
                    if col in pool_tl.columns:
                        out.append(RhythmSignal(f"{col}:{pool}", kind, pool, pool))
        out.sort(key=lambda s: (s.kind != "traffic", s.kind))
        self._signals = out
        return out

    def find(self, name: str) -> RhythmSignal:
        for s in self.signals():
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.signals()) or "none"
        raise NotEnoughDataError(f"signal {name!r} is not in the store {self.store.path}; "
                                 f"known signals: {known}")

    def frame(self, signal: RhythmSignal | str) -> pl.DataFrame:
        """The signal's ``ts, value`` frame (``ts`` the end of each step, UTC)."""
        sig = self.find(signal) if isinstance(signal, str) else signal
        col, _, entity = sig.name.partition(":")
        if col == "metric":
            step_ms = int(self.store.query(q.METRIC_STEP_MS, {"metric": entity})["step_ms"][0])
            step_ms = max(step_ms, self.step_s * 1000)
            raw = self.store.query(q.METRIC_STEP_SUM, {"metric": entity, "step_ms": step_ms})
            lo = self.start_ms if self.start_ms is not None else -(2 ** 62)
            hi = self.end_ms if self.end_ms is not None else 2 ** 62
            return raw.filter(pl.col("ts_ms").is_between(lo, hi)).select(
                pl.col("ts_ms").cast(pl.Datetime("ms", "UTC")).alias("ts"), pl.col("value").cast(pl.Float64))
        if col in SERVICE_COLUMNS:
            tl, key = self.service_timeline(), "service"
        else:
            tl, key = self.pool_timeline(), "pool"
        return (tl.filter(pl.col(key) == entity)
                .group_by("ts").agg(pl.col(col).sum() if col.startswith("gpus") or col == "rps"
                                    else pl.col(col).mean())
                .sort("ts").select("ts", pl.col(col).cast(pl.Float64).alias("value")))

    def batch_for(self, signal: RhythmSignal) -> pl.DataFrame | None:
        """GPUs held by batch in the signal's pool (the only pool, when the signal has none)."""
        tl = self.pool_timeline()
        if not tl.height or "gpus_batch" not in tl.columns:
            return None
        pools = tl["pool"].drop_nulls().unique().to_list()
        pool = signal.pool if signal.pool in pools else (pools[0] if len(pools) == 1 else None)
        if pool is None:
            return None
        return tl.filter(pl.col("pool") == pool).select("ts", "gpus_batch").sort("ts")

    def is_servegen(self) -> bool:
        """Whether a loaded source is the ServeGen trace (whose date and zone are assumptions)."""
        names = self.store.sources()
        return bool(names.height and (names["name"].str.to_lowercase().str.contains("servegen").any()
                                      or (names["format"] == "servegen-rate").any()))
