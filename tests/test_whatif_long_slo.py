"""Long SLOs (issue 44): image and long-generation services answer in 10-90 s, and their SLOs
are tens of seconds. The what-if takes an SLO up to an hour, and its queueing model holds at
those service times: at light load a step's p99 is the service time's own 99th percentile
(exponential service: mean x ln 100), and it grows as the replicas fill."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.errors import ConfigError
from analytics.whatif import compare
from analytics.whatif.outputs import simulate
from analytics.whatif.params import MAX_SLO_MS, BatchParams, PoolParams, PoolScenario, ServiceParams


def _scenario(mean_s: float, utilization: float, slo_ms: float = 70_000.0) -> PoolScenario:
    # four replicas held (the autoscaler's minimum and maximum), so the load is what moves
    svc = ServiceParams(service_rate_per_slot_rps=1.0 / mean_s, concurrency=4, slo_ms=slo_ms,
                        timeout_s=600.0, min_replicas=4, max_replicas=4, warmup_min=2.0)
    traffic = np.full(2 * 1440, 4 * 4 * utilization / mean_s)  # 4 replicas of 4 slots
    return PoolScenario(traffic_rps=traffic, start_ts_ms=1_780_000_000_000, step_s=60, service=svc,
                        pool=PoolParams(gpus=16), batch=BatchParams(jobs=()))


@pytest.mark.parametrize("mean_s", [10.0, 30.0, 90.0])
def test_the_queueing_model_holds_at_generation_service_times(mean_s: float) -> None:
    light = simulate(_scenario(mean_s, 0.3), "shared").summary.p99_ms
    assert light == pytest.approx(mean_s * 1000 * math.log(100), rel=0.01)
    busy = simulate(_scenario(mean_s, 0.9), "shared").summary.p99_ms
    assert busy > 1.1 * light  # M/M/16 at 90%: the wait adds about an eighth at the tail


def test_an_slo_of_seventy_seconds_is_modelled_under_every_policy() -> None:
    scn = _scenario(10.0, 0.3)  # p99 46 s against a 70 s SLO: no minute over it
    results = compare(scn, ("shared", "partitioned", "polite", "preemption", "tidal", "mig", "timeslice"))
    assert {name: r.summary.violation_minutes for name, r in results.items()} == dict.fromkeys(results, 0.0)
    over = simulate(_scenario(30.0, 0.3), "shared").summary  # p99 138 s: every minute over
    assert over.violation_minutes == pytest.approx(2 * 1440)


def test_an_slo_up_to_an_hour_is_taken_and_beyond_it_refused() -> None:
    assert simulate(_scenario(10.0, 0.3, slo_ms=MAX_SLO_MS), "shared").summary.violation_minutes == 0.0
    with pytest.raises(ConfigError, match="slo_ms"):
        _scenario(10.0, 0.3, slo_ms=MAX_SLO_MS + 1).validate()
