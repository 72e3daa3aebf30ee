"""The presets reproduce the design's two stories before anyone edits them."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.whatif import PRESETS, compare


@pytest.fixture(scope="module")
def morning() -> dict:
    return compare(PRESETS["morning-ramp"](), ("shared", "partitioned"))


@pytest.fixture(scope="module")
def tidal() -> dict:
    return compare(PRESETS["tidal-a100"](), ("partitioned", "tidal", "mig"))


def test_morning_ramp_shared_runs_about_4x_p99_for_about_90_minutes(morning: dict) -> None:
    shared, part = morning["shared"], morning["partitioned"]
    days = shared.series["p99_ms"].size / 1440
    per_day = shared.summary.violation_minutes / days
    assert 70 <= per_day <= 110
    baseline = part.summary.median_minute_p99_ms
    ratio = shared.summary.worst_minute_p99_ms / baseline
    assert 3.0 <= ratio <= 5.0
    # Each morning's violation is one stretch from the ramp until the fine-tune ends + warm-up.
    v = shared.series["violation"].reshape(-1, 1440)
    for day in v[1:]:
        idx = np.flatnonzero(day)
        assert idx.size and idx[-1] - idx[0] + 1 == idx.size
        assert 9 * 60 + 30 <= idx[0] <= 10 * 60 and 11 * 60 <= idx[-1] <= 11 * 60 + 15


def test_morning_ramp_partitioned_has_no_violations(morning: dict) -> None:
    assert morning["partitioned"].summary.violation_minutes == 0.0
    assert morning["partitioned"].summary.externality_cost == 0.0
    assert morning["shared"].summary.externality_cost > 0.0


def test_tidal_a100_lifts_allocation_from_55_to_about_85(tidal: dict) -> None:
    static = tidal["partitioned"].summary
    mig = tidal["mig"].summary
    assert 0.50 <= static.pool_utilization <= 0.60
    assert 0.80 <= mig.pool_utilization <= 0.90
    assert mig.mig_profile == "3g.40gb"
    # The honest cost: MIG slices serve each request slower (p99 doubles), within this SLO.
    assert mig.p99_ms > 1.8 * static.p99_ms
    assert mig.slo_compliance >= 0.99
    # Batch gets far more done than in the static partition's small class-C pool.
    assert mig.batch_goodput_gpu_hours > 4 * static.batch_goodput_gpu_hours
    assert tidal["tidal"].summary.violation_minutes == 0.0
