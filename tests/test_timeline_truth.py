"""The timelines recover the simulator's truth: GPU holdings exactly, p99 within the bucket width.

The simulated cluster (``analytics.sample``) has general GPUs held by inference and batch pods,
MIG-split GPUs (one instance without pod labels) and a time-sliced GPU shared by notebooks.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analytics import signals as sg
from analytics.store import Store
from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline

from analytics.sample import sim
from analytics.sample import export

DAYS, GPUS, SEED = 2, 16, 7


@pytest.fixture(scope="module")
def run():
    result = sim.simulate("morning", days=DAYS, gpus=GPUS, seed=SEED)
    st = Store(":memory:")
    try:
        export.load_into(st, result)
        yield result, st
    finally:
        st.close()


def expected_holdings(result) -> pl.DataFrame:
    """Per minute, GPUs per class from the simulator's own state."""
    n = result.n_min
    pool = result.full.pool
    cols = {c: np.zeros(n) for c in ("inference", "batch", "other", "unknown", "idle")}
    for g in result.topology.gpus:
        if g.role != "general":
            continue
        h = pool.holders[:, g.index]
        cols["idle"] += h < 0
        for cls in ("inference", "batch", "other"):
            kl = np.array([pool.pods[i].klass == cls if i >= 0 else False for i in h])
            cols[cls] += kl
    dev = result.dev_pods
    for g in result.topology.gpus:
        if g.role == "mig":
            # compute slices no instance uses (3g + 3g leaves 1 of 7) are idle: the GPU still counts whole
            cols["idle"] += 1 - sum(int(prof.split("g.")[0]) for prof, _ in g.mig) / 7
            for p in (p for p in dev if p.gpu == g.index):
                share = int(p.mig[0].split("g.")[0]) / 7
                alive = np.zeros(n, bool)
                alive[p.created_min:p.end_min] = True
                cols["unknown" if p.hide_pod_labels else "other"] += alive * share
        elif g.role == "timeslice":
            used = np.zeros(n, bool)
            for p in (p for p in dev if p.gpu == g.index and p.mig is None):
                used[p.created_min:p.end_min] = True
            cols["other"] += used
            cols["idle"] += ~used
    return pl.DataFrame({"ts_ms": result.ts_ms(), **{f"gpus_{c}": v for c, v in cols.items()}})


def test_whatif_timeline_recovers_holdings_exactly(run):
    result, st = run
    tl = pool_timeline(st, TimelineConfig(step_s=60))
    assert tl["pool"].unique().to_list() == ["default"]
    assert tl.height == result.n_min
    want = expected_holdings(result)
    got = tl.with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms")).join(want, on="ts_ms", suffix="_want")
    assert got.height == result.n_min
    for c in ("inference", "batch", "other", "unknown", "idle"):
        diff = (got[f"gpus_{c}"] - got[f"gpus_{c}_want"]).abs()
        assert diff.max() < 1e-9, f"gpus_{c}: {got.filter(diff > 1e-9).head(3)}"
    # the classes add up to the pool's GPUs at every step, MIG and time-sliced devices included
    parts = tl.select(pl.sum_horizontal("gpus_inference", "gpus_batch", "gpus_other", "gpus_unknown", "gpus_idle"))
    assert np.allclose(parts.to_series().to_numpy(), GPUS) and np.allclose(tl["gpus_total"].to_numpy(), GPUS)
    assert tl["gpus_batch"].max() > 0 and tl["gpus_inference"].max() > 0
    # the pool's autoscalers: desired and ready replicas summed over its services
    truth = export.truth_p99(result).group_by("ts_ms").agg(pl.col("desired_replicas").sum(),
                                                          pl.col("ready_replicas").sum())
    hpa = tl.with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms")).join(truth, on="ts_ms", suffix="_true")
    assert (hpa["desired_replicas"] == hpa["desired_replicas_true"]).all()
    assert (hpa["ready_replicas"] == hpa["ready_replicas_true"]).all()
    assert tl["pending_pods"].null_count() == 0 and tl["pending_pods"].max() > 0


def test_holdings_by_workload_match_pods(run):
    result, st = run
    h = holdings(st, TimelineConfig(step_s=60))
    batch_workloads = {p.workload for p in result.full.pool.pods if p.klass == "batch"}
    got = set(h.filter(pl.col("cls") == "batch")["workload"].unique().to_list())
    assert got == batch_workloads


def _bounds(metric: str) -> list[float]:
    return [*(sg.VLLM_TTFT_BUCKETS_S if metric == sg.VLLM_TTFT else sg.HTTP_DURATION_BUCKETS_S), math.inf]


def test_service_timeline_p99_within_bucket_width_and_rps_exact(run):
    result, st = run
    tl = service_timeline(st, TimelineConfig(step_s=60))
    truth = export.truth_p99(result)
    assert set(tl["service"]) == set(truth["service"])
    got = (tl.with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms"))
           .join(truth, on=["ts_ms", "service"], suffix="_true")
           .filter(pl.col("ts_ms") > result.start_ms))  # the first scrape is every counter's baseline
    assert got.height == truth.height - truth["service"].n_unique()
    # requests per step: exact
    assert np.allclose(got["rps"].to_numpy() * 60, got["requests"].to_numpy())
    # autoscaler gauges: exact
    assert (got["desired_replicas"] == got["desired_replicas_true"]).all()
    assert (got["ready_replicas"] == got["ready_replicas_true"]).all()
    # p99 within the width of the bucket holding the simulator's own p99
    checked = misses = 0
    for r in got.filter(pl.col("p99_ms_true").is_not_nan() & (pl.col("requests") > 0)).iter_rows(named=True):
        bounds = _bounds(r["slo_metric"])
        t = r["p99_ms_true"] / 1000
        i = next(k for k, e in enumerate(bounds) if t <= e)
        lo, hi = (0.0 if i == 0 else bounds[i - 1]), bounds[i]
        width = (hi - lo) if math.isfinite(hi) else 0.0
        checked += 1
        misses += abs(r["p99_ms"] / 1000 - t) > width + 1e-9
    assert checked > 1000
    assert misses / checked < 0.01, f"{misses} of {checked} steps outside the bucket width"
