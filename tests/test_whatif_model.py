"""Invariants of the pool what-if model: what must hold whatever the parameters."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.errors import ConfigError
from analytics.whatif import (POLICIES, PRESETS, BatchJob, BatchParams, PoolParams, PoolScenario,
                            ServiceParams, compare, simulate)
from analytics.whatif.batch import young_daly_tau
from analytics.whatif.presets import PRESET_START_MS, daily_curve


def small_scenario(gpus: int = 24, job_gpus: int = 16, days: int = 2, start_hour: float = 2.0,
                   duration_h: float = 8.0, reservation_gpus: int | None = None, seed: int = 3) -> PoolScenario:
    svc = ServiceParams(service_rate_per_slot_rps=50.0, concurrency=4, warmup_min=5.0,
                        slo_ms=150.0, timeout_s=10.0, cooldown_min=5.0,
                        target_utilization=0.6, min_replicas=1)
    traffic = daily_curve([(0.0, 150.0), (8.5, 150.0), (9.5, 1400.0), (18.0, 1400.0),
                           (21.0, 150.0)], days)
    job = BatchJob(name="ft", team="research", gpus=job_gpus, start_hour=start_hour,
                   duration_h=duration_h, checkpoint_cost_min=2.0, restore_min=3.0,
                   eviction_delay_min=1.0)
    pool = PoolParams(gpus=gpus, reservation_gpus=gpus // 2 if reservation_gpus is None else reservation_gpus,
                      split_b=0.1, tidal_start_hour=22.0,
                      tidal_end_hour=8.0, polite_release_hour=8.0, seed=seed,
                      gpu_model="A100-80GB", mig_resplit_drain_min=5.0)
    return PoolScenario(traffic_rps=traffic, start_ts_ms=PRESET_START_MS + 60_000,
                        service=svc, batch=BatchParams(jobs=(job,)), pool=pool, name="small")


@pytest.fixture(scope="module")
def morning() -> dict:
    return compare(PRESETS["morning-ramp"](3))


def test_every_policy_reports_the_cli_keys(morning: dict) -> None:
    for name in POLICIES:
        s = morning[name].summary
        for key in ("slo_compliance", "slo_compliance_minutes", "violation_minutes", "p99_ms",
                    "worst_minute_p99_ms", "pool_utilization", "pool_utilization_active",
                    "batch_gpu_hours", "batch_goodput_gpu_hours", "externality_cost"):
            assert key in s.as_dict(), (name, key)
        assert 0.0 <= s.slo_compliance <= 1.0
        assert 0.0 <= s.pool_utilization_active <= s.pool_utilization + 1e-9 <= 1.0 + 1e-9


def test_shared_never_beats_partitioned_in_the_morning_story(morning: dict) -> None:
    shared, part = morning["shared"].summary, morning["partitioned"].summary
    assert shared.violation_minutes > 0
    assert shared.violation_minutes >= part.violation_minutes
    # The violations are in the morning, while the fine-tune holds the GPUs.
    r = morning["shared"]
    hours = (r.series["ts_ms"] // 60_000 - 1) % 1440 / 60.0
    v = r.series["violation"] > 0  # the chance of reading over (0 or 1: a preset has no reading noise)
    assert np.all((hours[v] >= 9.0) & (hours[v] < 11.5))


def test_goodput_never_exceeds_gpu_hours(morning: dict) -> None:
    for name, r in morning.items():
        s = r.summary
        assert s.batch_goodput_gpu_hours <= s.batch_gpu_hours + 1e-9, name
        for job in r.jobs:
            assert job["goodput_gpu_h"] <= job["held_gpu_h"] + 1e-9


def test_costs_add_up(morning: dict) -> None:
    for name, r in morning.items():
        s = r.summary
        assert s.cost_total == pytest.approx(s.cost_reserved + s.cost_spot
                                                + s.cost_on_demand)
        assert s.cost_per_useful_gpu_hour * s.useful_gpu_hours == pytest.approx(
            s.cost_total)
        assert s.useful_gpu_hours == pytest.approx(s.inference_gpu_hours
                                                      + s.batch_goodput_gpu_hours)
        ledger = sum(row["cost"] for row in r.externality)
        assert ledger == pytest.approx(s.violation_cost)
        assert sum(row["violation_minutes"] for row in r.externality) == pytest.approx(
            s.violation_minutes)


def test_externality_is_charged_to_the_batch_team(morning: dict) -> None:
    r = morning["shared"]
    teams = {row["team"]: row for row in r.externality}
    assert teams["ml-research"]["violation_minutes"] > 0.9 * r.summary.violation_minutes
    assert r.summary.externality_cost == pytest.approx(teams["ml-research"]["cost"])


def test_no_violations_means_no_externality(morning: dict) -> None:
    for name, r in morning.items():
        if r.summary.violation_minutes == 0:
            assert r.summary.externality_cost == 0.0, name
            assert r.externality == []


def test_capacity_never_overcommitted(morning: dict) -> None:
    for name, r in morning.items():
        s = r.series
        assert np.all(s["ready_replicas"] <= s["desired_replicas"] + 1e-9), name
        assert np.all(s["allocated_gpus"] <= 64 + 1e-9), name
        if name != "timeslice":
            assert np.all(s["inference_gpus"] + s["batch_gpus"] <= 64 + 1e-9), name


def test_preemption_pays_with_lost_work_and_interruptions(morning: dict) -> None:
    s = morning["preemption"].summary
    assert s.batch_interruptions > 0
    assert s.batch_goodput_gpu_hours < s.batch_gpu_hours
    # The ramp evicts the job daily: Young/Daly gives a finite interval from the first pass.
    assert s.checkpoint_interval_min["nightly-finetune"] is not None
    assert s.mean_interruption_interval_min is not None


def test_young_daly_interval() -> None:
    assert young_daly_tau(3.0, 600.0, 1.0) == pytest.approx(np.sqrt(2 * 3 * 600) - 3)
    assert young_daly_tau(3.0, float("inf"), 1.0) == float("inf")
    assert young_daly_tau(0.0, 600.0, 1.0) == 1.0  # free checkpoints: every step


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.integers(18, 40), extra=st.integers(1, 12), policy=st.sampled_from(POLICIES))
def test_more_gpus_never_add_violation_minutes(gpus: int, extra: int, policy: str) -> None:
    """From 18 GPUs the 16-GPU job is admitted at 02:00 in every pool compared.

    (Below that, first-come sharing is not monotone: a pool one GPU too small to admit the
    job has no job to starve inference, and one more GPU lets it in.)
    """
    a = simulate(small_scenario(gpus=gpus), policy).summary.violation_minutes
    b = simulate(small_scenario(gpus=gpus + extra), policy).summary.violation_minutes
    assert b <= a + 1e-9


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_gpus=st.integers(1, 30), start=st.sampled_from([0.0, 2.0, 7.5, 9.0, 14.0]),
       dur=st.floats(0.5, 30.0), policy=st.sampled_from(POLICIES))
def test_goodput_bounded_for_any_job(job_gpus: int, start: float, dur: float,
                                     policy: str) -> None:
    r = simulate(small_scenario(job_gpus=job_gpus, start_hour=start, duration_h=dur), policy)
    s = r.summary
    assert 0.0 <= s.batch_goodput_gpu_hours <= s.batch_gpu_hours + 1e-9
    work = job_gpus * dur  # GPU-hours of work per instance, on however many GPUs it gets
    for job in r.jobs:
        assert job["goodput_gpu_h"] <= work * (1 + 1e-9)
        if job["completed"]:
            assert job["goodput_gpu_h"] == pytest.approx(work, rel=1e-9)


def test_reservation_at_or_above_peak_need_gives_no_violations() -> None:
    scn = small_scenario(gpus=40)
    svc = scn.service
    replica = svc.service_rate_per_slot_rps * svc.concurrency * svc.target_utilization
    peak_gpus = int(np.ceil(scn.traffic_rps.max() / replica))
    for a in (peak_gpus, peak_gpus + 3):
        s = replace(scn, pool=replace(scn.pool, reservation_gpus=a, split_b=0.0))
        assert simulate(s, "partitioned").summary.violation_minutes == 0.0
    # ... and a reservation well below it does violate.
    s = replace(scn, pool=replace(scn.pool, reservation_gpus=peak_gpus // 2, split_b=0.0))
    assert simulate(s, "partitioned").summary.violation_minutes > 0


def test_timeslice_slows_inference_and_blames_the_batch_team() -> None:
    scn = small_scenario(gpus=20, job_gpus=18, start_hour=9.0, duration_h=10.0)
    scn = replace(scn, pool=replace(scn.pool, timeslice_interference=3.0))
    r = simulate(scn, "timeslice")
    assert r.summary.violation_minutes > 0
    teams = {row["team"] for row in r.externality}
    assert "research" in teams
    assert r.summary.externality_cost > 0
    # Batch is slowed too: it holds its GPUs longer than the work it gets done.
    assert r.summary.batch_goodput_gpu_hours < 0.9 * r.summary.batch_gpu_hours


def test_validation_names_the_parameter() -> None:
    scn = small_scenario()
    bad = replace(scn, service=replace(scn.service, target_utilization=1.5))
    with pytest.raises(ConfigError, match="target_utilization"):
        simulate(bad, "shared")
    with pytest.raises(ConfigError, match="unknown policy"):
        simulate(scn, "fair-share")
    neg = replace(scn, traffic_rps=-scn.traffic_rps)
    with pytest.raises(ConfigError, match="negative"):
        simulate(neg, "shared")
    twice = replace(scn, batch=BatchParams(jobs=scn.batch.jobs * 2))
    with pytest.raises(ConfigError, match="used twice"):
        simulate(twice, "shared")


def test_compare_equals_simulate_one_by_one() -> None:
    scn = PRESETS["tidal-a100"](2)
    together = compare(scn)
    for name in POLICIES:
        alone = simulate(scn, name)
        # Equal up to the quantile solver's tolerance (it stops when a whole batch converged).
        got = together[name].summary.as_dict()
        for key, value in alone.summary.as_dict().items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-6), (name, key)
            else:
                assert got[key] == value, (name, key)
        np.testing.assert_allclose(together[name].series["p99_ms"], alone.series["p99_ms"],
                                   rtol=1e-6)


@pytest.mark.parametrize("policy,window", [("tidal", (22.0, 8.0)), ("polite", (2.0, 8.0))])
def test_batch_holds_gpus_only_inside_its_window(policy: str, window: tuple) -> None:
    r = simulate(small_scenario(days=3, duration_h=20.0), policy)
    hours = (r.series["ts_ms"] // 60_000 - 1) % 1440 / 60.0
    start, end = window
    inside = (hours >= start) | (hours < end) if start > end else (hours >= start) & (hours < end)
    assert r.series["batch_gpus"][~inside].max() == 0.0
    assert r.series["batch_gpus"][inside].max() > 0.0
    # A 20-hour job cannot finish in one window: it is drained and resumed, losing nothing.
    assert r.summary.batch_lost_gpu_hours == 0.0
    assert r.summary.batch_goodput_gpu_hours > 0.0


def test_max_replicas_caps_the_autoscaler_and_a_surge_beyond_it_queues() -> None:
    base = small_scenario(gpus=40, job_gpus=1, reservation_gpus=36)
    free = simulate(base, "shared")
    # The 1400 req/s peak needs 7 replicas of 4 x 50 req/s; the autoscaler wants 12.
    cap = 6
    assert free.series["ready_replicas"].max() > cap + 4
    capped = simulate(replace(base, service=replace(base.service, max_replicas=cap)), "shared")
    assert capped.series["ready_replicas"].max() == cap
    assert free.summary.violation_minutes == 0.0
    assert capped.summary.violation_minutes > 0.0  # free GPUs, yet the peak queues


def test_max_replicas_below_min_replicas_is_refused() -> None:
    scn = small_scenario()
    bad = replace(scn, service=replace(scn.service, min_replicas=5, max_replicas=4))
    with pytest.raises(ConfigError, match="max_replicas"):
        bad.validate()


def test_latency_floor_and_busy_slowdown_raise_p99_and_violations() -> None:
    scn = small_scenario(gpus=40, job_gpus=1, reservation_gpus=36)
    plain = simulate(scn, "partitioned").summary
    floored = simulate(replace(scn, service=replace(scn.service, latency_floor_ms=60.0)),
                       "partitioned").summary
    busy = simulate(replace(scn, service=replace(scn.service, latency_floor_ms=60.0,
                                                 busy_slowdown=3.0)), "partitioned").summary
    assert floored.median_minute_p99_ms == pytest.approx(plain.median_minute_p99_ms + 60.0,
                                                            rel=1e-6)
    assert busy.worst_minute_p99_ms > floored.worst_minute_p99_ms
    assert busy.violation_minutes >= floored.violation_minutes > \
        plain.violation_minutes


def test_timeslice_replicas_add_interference_and_two_is_the_old_model() -> None:
    """The device plugin's time-slicing ``replicas`` (pods per GPU): two is one batch pod beside
    the inference pod (the interference as given); each further pod adds the same again."""
    scn = small_scenario(gpus=20, job_gpus=18, start_hour=9.0, duration_h=10.0)
    base = simulate(scn, "timeslice").summary
    two = simulate(replace(scn, pool=replace(scn.pool, timeslice_replicas=2)), "timeslice").summary
    assert two == base  # the default is the model as it was
    four = simulate(replace(scn, pool=replace(scn.pool, timeslice_replicas=4)), "timeslice").summary
    assert four.p99_ms > two.p99_ms and four.violation_minutes >= two.violation_minutes
    # batch is slowed too: the same work holds its GPUs longer
    assert four.batch_gpu_hours > two.batch_gpu_hours
    # other policies never time-slice: unchanged
    for policy in ("shared", "partitioned"):
        assert simulate(replace(scn, pool=replace(scn.pool, timeslice_replicas=4)), policy).summary \
            == simulate(scn, policy).summary
    with pytest.raises(ConfigError, match="timeslice_replicas"):
        replace(scn, pool=replace(scn.pool, timeslice_replicas=1)).validate()


def test_one_checkpoint_interval_for_every_job(morning: dict) -> None:
    scn = PRESETS["morning-ramp"](3)
    own = simulate(scn, "preemption").summary.checkpoint_interval_min
    assert simulate(replace(scn, pool=replace(scn.pool, checkpoint_interval_min=-1.0)),
                    "preemption").summary.checkpoint_interval_min == own  # -1: each job's own
    fixed = simulate(replace(scn, pool=replace(scn.pool, checkpoint_interval_min=30.0)), "preemption").summary
    assert set(fixed.checkpoint_interval_min.values()) == {30.0}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=60),
       st.integers(1, 70), st.sampled_from(["max", "min"]))
def test_the_trailing_window_is_scipys(values: list[float], window: int, op: str) -> None:
    """The policies' trailing max/min (numpy windows, no scipy import on a replay) equals scipy's
    filter with the first value repeated before the start, on the same inputs."""
    from scipy.ndimage import maximum_filter1d, minimum_filter1d

    from analytics.whatif.policies import _trailing

    x = np.array(values, dtype=float)
    want = x.copy() if window <= 1 or not x.size else (maximum_filter1d if op == "max" else minimum_filter1d)(
        x, window, mode="nearest", origin=(window - 1) // 2)
    assert np.array_equal(_trailing(x, window, op), want)
