"""What a before/after comparison reads, built once per store, step and SLOs.

:class:`ChangeBasis` holds the whole span's timelines, its tail events and its Kueue queue
signals; every before/after is cut from it (:func:`analytics.timeline.slicing.slice_timelines`),
so moving the change time or a period's length never reads the store again. The what-if's
calibrations of a period are kept on the basis too, keyed by the period, the service and the SLO.

Timelines come from **one** call, :func:`_whole_timelines`: their one owner,
:func:`analytics.timeline.store_timelines` (what the backtest, the review and ``tidelens events``
read), with the store facts read in the same pass (the GPU model among them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from analytics.errors import NotEnoughDataError, TidelensError
from analytics.events import EventsConfig
from analytics.events.pipeline import analyse_timelines
from analytics.signals import KUEUE_ADMITTED, KUEUE_PENDING
from analytics.slo import SloTable, resolve_slos
from analytics.sql import store as q
from analytics.timeline import TimelineConfig, Timelines, store_timelines
from analytics.timeline.slicing import slice_timelines
from analytics.whatif.calibrate import gpu_model_from

if TYPE_CHECKING:
    from analytics.events import EventsAnalysis
    from analytics.store import Store
    from analytics.workloads import WorkloadMap


@dataclass
class ChangeBasis:
    """The whole span a comparison cuts its periods from (see the module)."""

    timelines: Timelines
    step_s: int
    slos: SloTable
    first_ms: int
    last_ms: int
    events: "EventsAnalysis | None" = None
    kueue: pl.DataFrame | None = None  # ts_ms, pending (workloads), admitted_total (counter)
    gpu_model: tuple[str, str] | None = None
    missing: dict[str, str] = field(default_factory=dict)
    calibrations: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # period -> (obs, scenario)

    def period(self, start_ms: int, end_ms: int) -> Timelines:
        """The timelines of the steps ending in ``(start_ms, end_ms]``, cut from the whole span's."""

        return slice_timelines(self.timelines, self.step_s, start_ms + 1, end_ms)


def _whole_timelines(store: "Store", step_s: int, wmap: "WorkloadMap | None") -> Timelines:
    """The one place this package obtains timelines (their owner's cache)."""

    return store_timelines(store, TimelineConfig(step_s=step_s), wmap)


def _ts_ms(frame: pl.DataFrame) -> np.ndarray:
    if frame.height == 0:
        return np.zeros(0, dtype=np.int64)
    return frame["ts"].dt.epoch("ms").to_numpy().astype(np.int64)


def kueue_signals(store: "Store") -> pl.DataFrame | None:
    """Kueue's pending workloads (summed over queues and statuses) and its admitted-workloads
    counter (summed) at each sample time; None when the store has neither."""

    span = {"start_ms": -(2**62), "end_ms": 2**62}
    pend = store.query(q.SAMPLES_OF_METRIC, {"metric": KUEUE_PENDING, **span})
    adm = store.query(q.SAMPLES_OF_METRIC, {"metric": KUEUE_ADMITTED, **span})
    if pend.height == 0 or adm.height == 0:
        return None
    p = pend.group_by("ts_ms").agg(pl.col("value").sum().alias("pending"))
    a = adm.group_by("ts_ms").agg(pl.col("value").sum().alias("admitted_total"))
    return p.join(a, on="ts_ms", how="inner").sort("ts_ms")


def change_basis(store: "Store", *, step_s: int = 60, slos: SloTable | None = None,
                 wmap: "WorkloadMap | None" = None, with_events: bool = True) -> ChangeBasis:
    """Build the basis of a store's comparisons: its timelines, tail events (as ``tidelens
    events`` finds them, over the whole span: one definition on both sides), Kueue signals and
    GPU model.

    Raises
    ------
    NotEnoughDataError
        The store has no steps with GPU or service data.
    """

    tl = _whole_timelines(store, step_s, wmap)
    ts = np.concatenate([_ts_ms(tl.pool), _ts_ms(tl.services)])
    if ts.size == 0:
        raise NotEnoughDataError("the store has no steps with GPU or service data: load exports first "
                                 "(`tidelens ingest --db PATH FILES`)")
    table = slos if slos is not None else resolve_slos(store)
    names = tl.service_names()
    basis = ChangeBasis(timelines=tl, step_s=step_s, slos=table, first_ms=int(ts.min()),
                        last_ms=int(ts.max()), kueue=kueue_signals(store),
                        gpu_model=gpu_model_from(tl.facts.gpu_models))
    if basis.kueue is None:
        basis.missing["batch queueing delay"] = ("no Kueue metrics (kueue_pending_workloads and "
                                                 "kueue_admitted_workloads_total) in the store")
    if with_events and names:

        try:
            basis.events = analyse_timelines(tl, EventsConfig(step_s=step_s), slos=table)
        except TidelensError as exc:
            basis.missing["tail events"] = str(exc)
    return basis
