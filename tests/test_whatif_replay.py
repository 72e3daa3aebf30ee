"""The what-if replays what happened: on the simulator's stories across export variants and on an
export written independently, the shared replay reproduces the observed minutes over the SLO
(within 15% or 10 minutes) and batch GPU-hours (within 10%), the model keeps every GPU of the
store's pool, and the partitioned pool with its default reservation does no worse than shared.

Measured before (the code of a2001e7, "pool = median GPUs less what others held while the
service was short"): on ``morning + no-ksm-pods`` (7 days, seed 4) the recommender's pool
calibrated to 48 of 64 GPUs, its replay ran 105 of 2,154 batch GPU-hours and 0 of 298 violation
minutes. Until the replay counted each step with the chance its p99 would read over the SLO
(``analytics.measures.over_slo_chance`` under the fitted reading noise), ``partitioned +
no-ksm-pods``'s recommender, whose only violations are a surge held at the SLO by its
autoscaler's maximum, replayed 68 minutes against 54 observed (+26%): the exporter read about
three in four of those steps over, the replay counted all of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analytics.events import EventsConfig
from analytics.timeline import store_timelines
from analytics.whatif import POLICIES, compare, reservation
from analytics.whatif.backtest import (BACKTEST_BATCH_TOLERANCE, BACKTEST_VIOLATION_FLOOR_MIN,
                                       BACKTEST_VIOLATION_TOLERANCE)
from analytics.whatif.calibrate import calibrate_frames
from analytics.whatif.form import MODEL_DAYS, last_days
from analytics.sample import load_into, simulate, truth
from analytics.store import Store
from analytics.slo import SloTable

pytestmark = [pytest.mark.slow]

CASES = {  # scenario, export variants, seed
    "morning": ("morning", (), 4),
    "morning+exported-labels+hpa-prefix+no-ksm-pods+scrape-30s":
        ("morning", ("exported-labels", "hpa-prefix", "no-ksm-pods", "scrape-30s"), 4),
    "mixed": ("mixed", (), 4),
    "partitioned+no-ksm-pods": ("partitioned", ("no-ksm-pods",), 4),
    # No autoscaler metrics, and an afternoon surge that chat-vllm's HPA met at its maximum (20)
    # with GPUs free: desired replicas inferred from traffic asked for 42.
    "morning+no-autoscaler (seed 2)": ("morning", ("no-autoscaler",), 2),
}
SERVICES = ("chat-vllm", "recommender")
# Five days of each story (seven until 2026-12-07, when every check passed at five as at seven,
# and the module took a quarter less; the measurements above were made at seven).
DAYS = 5


def _calibrations(scenario: str, variants: tuple[str, ...], seed: int) -> dict:
    res = simulate(scenario, days=DAYS, gpus=64, seed=seed, variants=variants)
    slos = {k: v["p99_ms"] for k, v in truth(res)["slos"].items()}
    with Store(":memory:") as st:
        load_into(st, res)
        tl = store_timelines(st, EventsConfig().timeline_config())
    return {svc: calibrate_frames(tl.services, tl.pool, tl.holdings, service=svc, slos=SloTable.from_ms(slos))
            for svc in SERVICES} | {"_pool": tl.pool}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    scenario, variants, seed = CASES[request.param]
    return request.param, scenario, _calibrations(scenario, variants, seed)


def _within(bt: dict) -> None:
    ov, mv = bt["observed_violation_minutes"], bt["model_violation_minutes"]
    assert abs(mv - ov) <= max(BACKTEST_VIOLATION_TOLERANCE * ov, BACKTEST_VIOLATION_FLOOR_MIN), bt["misses"]
    ob, mb = bt["observed_batch_gpu_hours"], bt["model_batch_gpu_hours"]
    assert abs(mb - ob) <= BACKTEST_BATCH_TOLERANCE * ob + 1e-9, bt["misses"]
    assert bt["within"] and not bt["misses"]


@pytest.mark.parametrize("svc", SERVICES)
def test_shared_replay_reproduces_minutes_and_batch_gpu_hours(case, svc):
    name, scenario, cals = case
    bt = cals[svc].backtest
    print(f"\n{name} {svc}: violation minutes {bt['observed_violation_minutes']:.0f} observed, "
          f"{bt['model_violation_minutes']:.0f} replayed ({bt['violation_minutes_error']:+.0%}); batch "
          f"{bt['observed_batch_gpu_hours']:.0f} / {bt['model_batch_gpu_hours']:.0f} GPU-h")
    assert bt["observed_batch_gpu_hours"] > 500  # every story runs the nightly fine-tune
    _within(bt)


def test_the_autoscalers_maximum_is_read_where_its_metrics_are_missing(case):
    """Without autoscaler metrics the maximum shows in the ready replicas, held at their most
    while the replicas inferred from traffic asked for more and GPUs were free; with them,
    in the desired replicas. A replay without it scaled chat-vllm's afternoon surge to 44
    replicas and counted 140 minutes of 174 (-20%)."""
    name, scenario, cals = case
    chat = cals["chat-vllm"].scenario
    if "no-autoscaler" in name:
        assert chat.service.max_replicas == 20
        assert "most ready replicas" in chat.provenance["service.max_replicas"]
    else:
        assert "ready replicas" not in chat.provenance["service.max_replicas"]


def test_every_gpu_of_the_pool_is_in_the_model(case):
    name, scenario, cals = case
    store_pool = float(np.median(cals["_pool"]["gpus_total"].to_numpy()))
    for svc in SERVICES:
        scn, obs = cals[svc].scenario, cals[svc].observation
        # the store's 64 GPUs, idle unlabelled ones included, whatever kube-state-metrics says
        assert scn.pool.gpus == store_pool == 64
        # what the other service and unmodelled work held stays held, step by step
        assert scn.others_gpus is not None and np.array_equal(scn.others_gpus, obs.others_gpus)
        assert obs.idle_gpus.max() > 10


def test_partitioned_with_the_default_reservation_beats_shared_on_contention(case):
    name, scenario, cals = case
    for svc in SERVICES:
        scn = last_days(cals[svc].scenario, MODEL_DAYS)
        assert scn.pool.reservation_gpus == -1  # automatic: what the peak needed plus headroom
        reserved, why = reservation(scn)
        assert 0 < reserved <= scn.pool.gpus and "what the peak needed" in why
        r = compare(scn, POLICIES)
        shared, part = r["shared"].summary, r["partitioned"].summary
        if scenario == "partitioned":
            continue  # the control: batch never touched inference there
        assert part.violation_minutes <= shared.violation_minutes, (svc, part, shared)
        assert shared.violation_minutes > 0
        # the partition never gives inference more than the reservation and the soft-shared B
        b = round(scn.pool.split_b * scn.pool.gpus)
        assert r["partitioned"].series["inference_gpus"].max() <= reserved + b + 1e-9


def test_batch_gpu_hours_are_conserved_under_every_policy(case):
    name, scenario, cals = case
    svc = SERVICES[0]
    scn = last_days(cals[svc].scenario, MODEL_DAYS)
    held_obs = cals[svc].backtest["observed_batch_gpu_hours"]
    for policy, res in compare(scn, POLICIES).items():
        s = res.summary
        # work done and work thrown away never exceed what was held
        assert s.batch_goodput_gpu_hours + s.batch_lost_gpu_hours <= s.batch_gpu_hours * (1 + 1e-9) + 1e-6
        # a policy never holds more GPUs than the pool has beside what others held
        used = res.series["allocated_gpus"]
        assert used.max() <= scn.pool.gpus + 1e-9, policy
    bt = cals[svc].backtest
    assert bt["model_batch_gpu_hours"] <= held_obs * (1 + BACKTEST_BATCH_TOLERANCE)


def test_the_independent_export_replays_too(tmp_path: Path):
    """The export written without the simulator (16 GPUs, HPA renamed, idle GPUs unlabelled, no
    kube-state-metrics pod series): the replay reproduces it and calibrates the whole pool."""
    from independent_export import write_story

    from analytics.ingest import ingest_path

    tr = write_story(tmp_path / "export", case="both", days=5, seed=4)
    with Store(tmp_path / "s.duckdb") as st:
        for f in tr["files"]:
            ingest_path(st, tmp_path / "export" / f)
        tl = store_timelines(st, EventsConfig().timeline_config())
    slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
    cal = calibrate_frames(tl.services, tl.pool, tl.holdings, service="chat-api-vllm", slos=SloTable.from_ms(slos))
    assert cal.scenario.pool.gpus == 16
    _within(cal.backtest)
    r = compare(last_days(cal.scenario, MODEL_DAYS), ("shared", "partitioned"))
    assert r["partitioned"].summary.violation_minutes < r["shared"].summary.violation_minutes
