"""Tail events against the simulator's truth: every scenario, two seeds, through the real store.

Each run: ``simulate`` -> ``load_into`` an in-memory store -> timelines ->
:func:`analytics.events.analyse`, scored by :mod:`truth_scoring` (a found event
matches a true one, one to one, when they overlap by at least half of the shorter). The naive
dashboard reading is scored beside it and printed in the same output (``pytest -s`` shows it).

Two scorings, each printed with the naive dashboard beside it: *strict* one to one
(:func:`truth_scoring.score`) and *tolerance-banded*
(:func:`truth_scoring.score_banded`: the truth's minutes whose p99 lies in the bucket
band around the SLO are ambiguous; events split or bridged across them match as one, events of
ambiguous minutes only are optional, and clear misses and clearly-below found events still count).

Two rows per run:

* **ours**: the whole chain, detection on the timeline's histogram p99 (what a user gets);
* **ours on the simulator's p99**: the same analysis with the timeline's p99 column replaced by
  the simulator's own per-minute p99 (the one the truth is defined on). It isolates attribution
  from the histogram.

Both rows meet the issue's targets strictly (detection F1 >= 0.95, cause accuracy >= 0.90,
misattribution F1 >= 0.90): the simulator exports exactly the requests its truth's p99 is
computed from (the minute's draws scaled to its request count, :mod:`analytics.sample.latency`),
and both SLOs are bucket bounds (chat 1 s, recommender 100 ms), so "true p99 > SLO" is "more
than 1% of the exported requests above the SLO", which is what ``histogram_quantile`` checks
exactly at a bound (DESIGN.md contract "the tolerance of any p99 check is the width of the
bucket holding the true value": zero at a bound).
:func:`test_histogram_and_truth_agree_on_every_minute_at_a_bucket_bound_slo` asserts that minute
by minute.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analytics import signals as sg
from analytics.events import EventsConfig, analyse
from analytics.events.detect import detect_runs
from analytics.timeline import store_timelines
from truth_scoring import Score, match, pooled, score, score_banded
from analytics.sample.export import load_into, truth, truth_p99
from analytics.sample.sim import simulate
from analytics.store import Store
from analytics.slo import SloTable

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("events_truth")]

SCENARIOS = ("morning", "partitioned", "mixed", "real-traffic")
SEEDS = (1, 2)
DAYS = 4
BOUNDS_MS = {"chat-vllm": [b * 1000 for b in sg.VLLM_TTFT_BUCKETS_S],
             "recommender": [b * 1000 for b in sg.HTTP_DURATION_BUCKETS_S]}


def _with_truth_p99(services: pl.DataFrame, tp: pl.DataFrame) -> pl.DataFrame:
    """The service timeline with its p99 replaced by the simulator's own per-minute p99."""
    s = services.with_columns(pl.col("ts").dt.epoch("ms").alias("_ts_ms"))
    j = s.join(tp.select(pl.col("ts_ms").alias("_ts_ms"), pl.col("service").cast(s.schema["service"]),
                         pl.col("p99_ms").alias("_true")), on=["_ts_ms", "service"], how="left")
    return j.with_columns(pl.col("_true").alias("p99_ms")).drop("_ts_ms", "_true")


def _run(scenario: str, seed: int) -> dict:
    res = simulate(scenario, days=DAYS, gpus=64, seed=seed)
    tr, tp = truth(res), truth_p99(res)
    slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
    cfg = EventsConfig()
    with Store(":memory:") as st:
        load_into(st, res)
        tl = store_timelines(st, cfg.timeline_config())
    ours = analyse(tl.services, tl.pool, tl.holdings, cfg=cfg, slos=SloTable.from_ms(slos))
    own = analyse(_with_truth_p99(tl.services, tp), tl.pool, tl.holdings, cfg=cfg, slos=SloTable.from_ms(slos))
    return {"truth": tr, "truth_p99": tp, "services": tl.services, "analysis": ours, "slos": slos,
            "score": score(tr, ours.events, truth_p99=tp, bucket_bounds_ms=BOUNDS_MS),
            "score_own": score(tr, own.events),
            "banded": score_banded(tr, ours.events, truth_p99=tp, bucket_bounds_ms=BOUNDS_MS),
            "banded_own": score_banded(tr, own.events, truth_p99=tp, bucket_bounds_ms=BOUNDS_MS)}


@pytest.fixture(scope="module")
def runs():
    return {(sc, seed): _run(sc, seed) for sc in SCENARIOS for seed in SEEDS}


def _table(runs, key: str, title: str) -> Score:
    scores: list[Score] = []
    print(f"\n{title}\nscenario      seed  tail events vs truth (ours | naive dashboard)")
    for (sc, seed), r in runs.items():
        print(f"{sc:13s} {seed:4d}  {r[key].line()}")
        scores.append(r[key])
    total = pooled(scores)
    print(f"{'pooled':13s}       {total.line()}\n  confusion {total.confusion}")
    return total


def test_scores_against_truth_with_naive_reading_beside(runs, capsys):
    with capsys.disabled():
        total = _table(runs, "score", "ours: detection on the timeline's histogram p99")
        own = _table(runs, "score_own", "ours on the simulator's own p99 (attribution isolated from the histogram)")
        banded = _table(runs, "banded", "ours, tolerance-banded scoring (truth's minutes inside the SLO's bucket band "
                        "are ambiguous; truth_scoring.score_banded)")
        banded_own = _table(runs, "banded_own", "ours on the simulator's own p99, tolerance-banded scoring")
    assert total.n_true >= 40
    # The targets, met when detection sees the p99 the truth is defined on.
    assert own.detection_f1_strict >= 0.95
    assert own.cause_accuracy >= 0.90
    assert own.misattribution_f1 >= 0.90
    # On the histogram p99, strictly (measured, 4 scenarios x 2 seeds x 4 days, 41 true events):
    # detection F1 1.000 (strict 1.000), cause accuracy 0.976, misattribution F1 0.986.
    assert total.detection_f1 >= 0.95
    assert total.detection_f1_strict >= 0.95
    assert total.cause_accuracy >= 0.90
    assert total.misattribution_f1 >= 0.90
    # Tolerance-banded (rule in truth_scoring.score_banded; kept as a second reading,
    # stricter bands are no longer needed). Measured: 17 required groups, 16 optional; detection
    # F1 1.000, cause accuracy 0.970, misattribution F1 0.982.
    assert banded.n_true >= 10
    assert banded.detection_f1 >= 0.95
    assert banded.cause_accuracy >= 0.90
    assert banded.misattribution_f1 >= 0.90
    assert banded_own.detection_f1 >= 0.95
    # The naive reading is worse on both counts, in the same run.
    for t in (total, own, banded, banded_own):
        assert t.naive_cause_accuracy < t.cause_accuracy - 0.3
        assert t.naive_misattribution_f1 < t.misattribution_f1


def test_histogram_and_truth_agree_on_every_minute_at_a_bucket_bound_slo(runs, capsys):
    rows = []
    for (sc, seed), r in runs.items():
        tl = r["services"].with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms"))
        for service, slo in r["slos"].items():
            b = np.asarray(BOUNDS_MS[service])
            lo, hi = float(b[b < slo].max()), float(b[b > slo].min())
            j = (r["truth_p99"].filter(pl.col("service") == service).select("ts_ms", "p99_ms")
                 .join(tl.filter(pl.col("service") == service).select("ts_ms", pl.col("p99_ms").alias("h")),
                       on="ts_ms", how="inner"))
            t_over = (j["p99_ms"].fill_null(0.0) > slo).to_numpy()
            h_over = (j["h"].fill_nan(None).fill_null(0.0) > slo).to_numpy()
            tv = j["p99_ms"].fill_null(0.0).to_numpy()
            differ = t_over != h_over
            in_band = differ & (tv > lo) & (tv <= hi)
            rows.append((sc, seed, service, int(t_over.sum()), int(h_over.sum()), int(differ.sum()),
                         int(in_band.sum())))
    with capsys.disabled():
        print("\nminutes above the SLO: truth | histogram | disagree | of which true p99 in the SLO's bucket band")
        for row in rows:
            print("  {:13s} {} {:12s} {:5d} {:5d} {:5d} {:5d}".format(*row))
    # Both SLOs are bucket bounds and the exported requests are the truth's: the histogram's
    # verdict is the truth's, minute by minute, wherever the service has traffic.
    assert all(s in BOUNDS_MS and np.isclose(np.asarray(BOUNDS_MS[s]), slo).any()
               for r in runs.values() for s, slo in r["slos"].items())
    assert sum(r[3] for r in rows) > 0
    assert sum(r[5] for r in rows) == 0


def test_partitioned_pool_has_no_batch_contention(runs):
    for seed in SEEDS:
        events = runs[("partitioned", seed)]["analysis"].events
        assert events and all(e.cause != "batch_contention" and not e.misattributed for e in events)


def test_surges_come_out_as_traffic_surge(runs):
    found_any = False
    for r in runs.values():
        tr, events = r["truth"], r["analysis"].events
        for i, j in match(tr["events"], events):
            if tr["events"][i]["cause"] == "traffic_surge":
                found_any = True
                assert events[j].cause == "traffic_surge"
    assert found_any


def test_evidence_values_equal_the_timeline(runs):
    r = runs[("morning", 1)]
    tl = r["services"].with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms"))
    assert r["analysis"].events
    for ev in r["analysis"].events:
        steps = tl.filter((pl.col("service") == ev.service) & (pl.col("ts_ms") > ev.start_ms)
                          & (pl.col("ts_ms") <= ev.end_ms)).sort("ts_ms")
        first = steps.row(0, named=True)
        e = ev.evidence
        assert ev.peak_p99_ms == pytest.approx(steps["p99_ms"].max())
        assert e["p99_observed_ms_at_peak"] == pytest.approx(round(steps["p99_ms"].max(), 3))
        assert e["ready_replicas_at_start"] == pytest.approx(first["ready_replicas"])
        assert e["desired_replicas_at_start"] == pytest.approx(first["desired_replicas"])
        peak = steps.filter(pl.col("p99_ms") == steps["p99_ms"].max()).row(0, named=True)
        assert e["traffic_rps_at_peak"] == pytest.approx(round(peak["rps"], 3))


def _seasonal_baseline_minutes(steps: pl.DataFrame, service: str, events) -> float:
    """Minutes of ``events`` a seasonal-latency baseline flags: p99 above its own median at that
    minute of day plus 3 robust sd (MAD), as a dashboard anomaly band would."""
    f = steps.filter(pl.col("service") == service).with_columns((pl.col("ts_ms") % 86_400_000).alias("tod"))
    prof = f.group_by("tod").agg(pl.col("p99_ms").median().alias("med"))
    f = f.join(prof, on="tod").with_columns((pl.col("p99_ms") - pl.col("med")).abs().alias("dev"))
    f = f.join(f.group_by("tod").agg((1.4826 * pl.col("dev").median()).alias("sd")), on="tod").sort("ts_ms")
    flag = (f["p99_ms"] > f["med"] + 3 * f["sd"]).fill_null(False).to_numpy()
    runs = detect_runs(f["ts_ms"].to_numpy(), flag, step_ms=60_000, min_duration_ms=300_000, merge_gap_ms=600_000)
    return sum(max(0, min(b, e.end_ms) - max(a, e.start_ms)) for a, b in runs for e in events) / 60_000


def test_recurring_morning_tail_found_every_weekday_and_missed_by_a_seasonal_baseline(runs):
    # Per service over both seeds (a 4-day seasonal median is swayed by one outsized morning).
    # Measured: chat-vllm 84 + 0 of 298 + 79 minutes (22%), recommender 56 + 20 of 333 + 229 (14%).
    flagged: dict[str, float] = {}
    ours: dict[str, float] = {}
    for seed in SEEDS:
        r = runs[("morning", seed)]
        tr, analysis = r["truth"], r["analysis"]
        morning_true = {e["start"][:10] for e in tr["events"] if e["cause"] == "batch_contention"}
        found = [e for e in analysis.events if e.cause == "batch_contention"]
        assert morning_true and morning_true <= {e.as_dict()["start"][:10] for e in found}
        for service in {e.service for e in found}:
            mine = [e for e in found if e.service == service]
            ours[service] = ours.get(service, 0.0) + sum(e.duration_min for e in mine)
            flagged[service] = flagged.get(service, 0.0) + _seasonal_baseline_minutes(analysis.steps, service, mine)
    assert set(ours) == {"chat-vllm", "recommender"}
    for service, minutes in ours.items():
        assert flagged[service] < 0.25 * minutes
