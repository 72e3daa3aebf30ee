"""The pool timeline's device pass read from the rules' recorded series, where a pull brought them.

``tidelens pull`` through the rules (:mod:`analytics.live.route`) stores no device series:
the server already summed the GPUs held by pool, class, team and workload (idle, unmanaged and
unknown included) and the share-weighted activity and memory per pool. This module turns those
into what :func:`analytics.timeline.pool.device_pass` returns, so every page and command reads
a store pulled either way alike.
"""

from __future__ import annotations

import polars as pl

from analytics.rules import compile as rc
from analytics.sql import recorded as q
from analytics.sql import timeline as tq
from analytics.store import Store
from analytics.workloads import WorkloadMap, classify_pods

METRICS: tuple[str, ...] = (rc.GPUS, rc.ACTIVITY_WEIGHTED, rc.ACTIVITY_WEIGHT, rc.FB_USED)


def has_recorded(store: Store) -> bool:
    """The store holds the rules' GPU holdings (a pull through the rules)."""
    return store.con.execute(tq.HAS_METRIC, {"metric": rc.GPUS}).fetchall()[0][0] > 0


def recorded_pass(store: Store, params: dict[str, int], wmap: WorkloadMap,
                  classified: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame] | None:
    """``(pods, held, stats)`` from the recorded series (``held``: GPUs by step end, pool, class,
    team and workload, which :func:`~analytics.timeline.pool.device_pass` frames as its holdings);
    ``None`` when the store has none."""
    if not has_recorded(store):
        return None
    rows = store.query(q.RECORDED_LAST, {**params, "metrics": list(METRICS)})
    held = (rows.filter((pl.col("metric") == rc.GPUS) & (pl.col("value") > 0))
            .group_by("ts_end_ms", "pool", "cls", "team", "workload").agg(pl.col("value").sum().alias("gpus")))
    wide = (rows.filter(pl.col("metric") != rc.GPUS).group_by("ts_end_ms", "pool", "metric")
            .agg(pl.col("value").sum()).pivot(on="metric", index=["ts_end_ms", "pool"], values="value"))
    for name in METRICS[1:]:
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    weight = pl.col(rc.ACTIVITY_WEIGHT)
    stats = wide.select(
        "ts_end_ms", "pool",
        pl.when(weight > 0).then(pl.col(rc.ACTIVITY_WEIGHTED) / weight).alias("activity_pct"),
        (pl.col(rc.FB_USED) / 1024.0).alias("mem_used_gib"))
    pods = classify_pods(store, wmap) if classified is None else classified
    return pods, held, stats
