"""The what-if model on real production traffic (ServeGen m-large, 14 days).

The fixture's 10-minute rates are interpolated to 1-minute steps and scaled x15 so the
service needs tens of replicas; its timestamp 0 is taken as 00:00 UTC (an assumption: the
trace's zone is unnamed). The pool and batch are the morning-ramp preset's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analytics.whatif import POLICIES, PRESETS, BatchParams, compare, simulate


FIXTURE = Path(__file__).parent / "fixtures" / "servegen_m_large_rate.csv"


@pytest.fixture(scope="module")
def real():
    rate = pl.read_csv(FIXTURE)["rate_rps"].to_numpy()
    minutes = np.arange(rate.size * 10) / 10.0
    traffic = np.interp(minutes, np.arange(rate.size), rate) * 15.0
    base = PRESETS["morning-ramp"](1)
    return replace(base, traffic_rps=traffic, name="servegen-m-large x15",
                   provenance={"traffic_rps": "tests/fixtures/servegen_m_large_rate.csv x15"})


@pytest.fixture(scope="module")
def results(real):
    return compare(real)


def test_accounting_holds_on_real_traffic(results) -> None:
    for name in POLICIES:
        s = results[name].summary
        assert s.batch_goodput_gpu_hours <= s.batch_gpu_hours + 1e-9, name
        assert s.cost_per_useful_gpu_hour * s.useful_gpu_hours == pytest.approx(
            s.cost_total)
        assert sum(r["violation_minutes"] for r in results[name].externality) == \
            pytest.approx(s.violation_minutes)
        assert 0.0 <= s.pool_utilization <= 1.0


def test_batch_never_helps_inference(real, results) -> None:
    alone = simulate(replace(real, batch=BatchParams(jobs=())), "shared").summary
    for name in ("shared", "polite", "preemption", "timeslice"):
        assert results[name].summary.violation_minutes >= alone.violation_minutes, name
        assert results[name].summary.slo_compliance <= alone.slo_compliance + 1e-12
    # ... and the shared pool is the worst of them on this traffic too.
    worst = max(results[n].summary.violation_minutes for n in POLICIES)
    assert results["shared"].summary.violation_minutes == worst
    assert results["shared"].summary.externality_cost > 0


def test_more_gpus_never_add_violations_on_real_traffic(real) -> None:
    mins = [simulate(replace(real, pool=replace(real.pool, gpus=g)), "preemption")
            .summary.violation_minutes for g in (56, 64, 80)]
    assert mins[0] >= mins[1] >= mins[2]
