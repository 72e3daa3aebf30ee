"""Headroom by hour, frontier, capacity plan and burst bands."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import polars as pl
import pytest

from analytics.measures import over_slo, over_slo_chance, split_violation_by_team, step_minutes
from analytics.whatif import (PRESETS, PolicyResult, burst_bands, capacity_plan, compare, frontier,
                              headroom_by_hour, simulate)
from analytics.whatif.ledger import ledger, policy_table
from analytics.whatif.outputs import PolicySummary


@pytest.fixture(scope="module")
def scn():
    return PRESETS["morning-ramp"](2)


def test_headroom_is_smallest_while_the_finetune_holds_gpus(scn) -> None:
    shared = headroom_by_hour(scn, "shared")
    part = headroom_by_hour(scn, "partitioned")
    assert shared.columns == ["hour", "max_surge_factor", "worst_surge_factor"]
    assert shared.height == 24
    by_hour = dict(zip(shared["hour"], shared["max_surge_factor"]))
    # At 10:00 the shared pool runs at ~99.6% of what it got: no room for any surge.
    assert by_hour[10] < 1.05
    assert dict(zip(part["hour"], part["max_surge_factor"]))[10] > 1.2
    assert (shared["worst_surge_factor"] <= shared["max_surge_factor"] + 1e-9).all()


def test_frontier_reservation_trades_utilization_for_compliance(scn) -> None:
    f = frontier(scn, "reservation", points=6)
    assert f.height == 6 and {"x", "utilization", "slo_compliance"} <= set(f.columns)
    comp = f["slo_compliance"].to_numpy()
    assert comp[-1] > comp[0]  # a bigger class A serves better
    assert f["violation_minutes"][-1] == 0.0
    g = frontier(scn, "gpus", points=5, policy="shared")
    assert (np.diff(g["x"].to_numpy()) > 0).all()


def test_capacity_plan_a_is_the_one_reservation(scn) -> None:
    """Pool A of the three-pool plan is the reservation the partitioned policy uses: set, or
    automatic (the peak's desired replicas x GPUs per replica, plus the headroom)."""
    from dataclasses import replace

    from analytics.whatif.policies import desired_replicas, reservation

    auto = replace(scn, pool=replace(scn.pool, reservation_gpus=-1, headroom=0.3))
    plan = capacity_plan(auto)
    assert plan["pool"].to_list() == ["A", "B", "C"]
    rows = {r["pool"]: r for r in plan.iter_rows(named=True)}
    a = rows["A"]["gpus"]
    svc = auto.service
    peak = desired_replicas(auto, svc.service_rate_per_slot_rps * svc.concurrency, prewarm=False).max()
    assert a == int(np.ceil(peak * svc.gpus_per_replica * 1.3)) == reservation(auto)[0]
    assert "what the peak needed" in rows["A"]["purpose"]
    more = capacity_plan(replace(auto, pool=replace(auto.pool, headroom=0.6)))
    assert more["gpus"][0] == int(np.ceil(peak * 1.6)) > a
    # an explicit reservation is what every consumer reads, the partitioned policy included
    fixed = replace(scn, pool=replace(scn.pool, reservation_gpus=20, split_b=0.0))
    assert capacity_plan(fixed)["gpus"][0] == 20
    held = simulate(fixed, "partitioned").series["inference_gpus"]
    assert held.max() <= 20
    # with the automatic reservation the partitioned pool meets the SLO the shared one breaks
    assert simulate(auto, "partitioned").summary.violation_minutes == 0.0
    assert simulate(auto, "shared").summary.violation_minutes > 0.0
    assert rows["C"]["gpus"] >= 48  # the fine-tune's gang
    assert rows["A"]["cost_per_day"] == pytest.approx(a * scn.pool.price_reserved_per_gpu_h * 24)


def test_burst_bands_are_ordered_and_seeded(scn) -> None:
    b1 = burst_bands(scn, "partitioned", seeds=4)
    b2 = burst_bands(scn, "partitioned", seeds=4)
    assert b1.equals(b2)
    assert b1.height == scn.steps
    assert (b1["p99_ms_p10"] <= b1["p99_ms_p50"]).all()
    assert (b1["p99_ms_p50"] <= b1["p99_ms_p90"]).all()
    assert (b1["p99_ms_p90"] <= b1["p99_ms_max"] + 1e-9).all()
    assert b1["violation_share"].max() > 0  # bursts up to 2x do break the SLO somewhere


def test_result_frame_has_utc_timestamps(scn) -> None:
    df = simulate(scn, "shared").frame()
    assert df.height == scn.steps
    assert isinstance(df.schema["ts"], pl.Datetime) and df.schema["ts"].time_zone == "UTC"
    assert df["ts"][0].hour == 0 and df["ts"][0].minute == 1  # step end


def test_violation_minutes_count_what_the_store_would_read(scn) -> None:
    """With reading noise a step counts with the chance its p99 reads over the SLO: the
    summary, its cost and the ledger all add up those chances; without it the calls are 0/1."""
    plain = simulate(scn, "shared")
    v = plain.series["violation"]
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert np.array_equal(v.astype(bool), over_slo(plain.series["p99_ms"], scn.service.slo_ms))

    noisy_scn = replace(scn, service=replace(scn.service, p99_noise_log_sd=0.2))
    noisy = simulate(noisy_scn, "shared")
    chance = noisy.series["violation"]
    assert np.allclose(chance, over_slo_chance(noisy.series["p99_ms"], scn.service.slo_ms, 0.2))
    assert ((chance > 0) & (chance < 1)).any()  # steps near the SLO count in part
    step_min = scn.step_s / 60.0
    s = noisy.summary
    assert s.violation_minutes == pytest.approx(chance.sum() * step_min)
    assert s.violation_cost == pytest.approx(s.violation_minutes * scn.pool.violation_price_per_min)
    book = ledger(noisy_scn, {"shared": noisy})
    assert book["violation_minutes"].sum() == pytest.approx(s.violation_minutes)
    # The same latency: the noise only changes how its steps are counted.
    assert np.array_equal(noisy.series["p99_ms"], plain.series["p99_ms"])


def test_the_best_policy_leads_by_whole_minutes() -> None:
    """A modelled fraction of a minute (steps' chances of reading over) is no lead: the
    cheaper of two policies the same to the minute is the one with the fewest."""
    def result(name: str, minutes: float, cost: float) -> PolicyResult:
        zeros = {f.name: 0.0 for f in fields(PolicySummary)}
        summary = PolicySummary(**zeros | {"violation_minutes": minutes, "cost_total": cost})
        return PolicyResult(name, {}, summary, [], [], None)

    t = policy_table({"partitioned": result("partitioned", 0.2, 900.0),
                      "mig": result("mig", 0.1, 1000.0), "shared": result("shared", 40.0, 800.0)})
    best = dict(zip(t["policy"], t["best"]))
    assert best == {"partitioned": "fewest minutes", "mig": "", "shared": "cheapest"}
    t = policy_table({"partitioned": result("partitioned", 2.0, 900.0),
                      "mig": result("mig", 1.0, 1000.0)})
    assert dict(zip(t["policy"], t["best"])) == {"partitioned": "cheapest", "mig": "fewest minutes"}


def test_the_ledger_and_the_externality_split_each_teams_minutes_alike() -> None:
    """The split of a step's violation between teams is measures' alone: the externality rows and
    the ledger by period give every team the same minutes (its own team's included)."""
    scn = PRESETS["tidal-a100"](2)
    for policy, r in compare(scn, ("shared", "timeslice")).items():
        parts, own = split_violation_by_team(r.series["violation"], r.trace.blame_by_team)
        want = {t: float(step_minutes(p.sum(), step_s=scn.step_s)) for t, p in parts.items()}
        want[scn.service.team] = want.get(scn.service.team, 0.0) + float(step_minutes(own.sum(), step_s=scn.step_s))
        want = {t: m for t, m in want.items() if m > 0}
        by_team = dict(ledger(scn, {policy: r}).group_by("team").agg(pl.col("violation_minutes").sum()).iter_rows())
        ext: dict[str, float] = {}
        for row in r.externality:
            ext[row["team"]] = ext.get(row["team"], 0.0) + row["violation_minutes"]
        assert by_team == pytest.approx(want) and ext == pytest.approx(want), policy
        assert sum(want.values()) == pytest.approx(r.summary.violation_minutes), policy
