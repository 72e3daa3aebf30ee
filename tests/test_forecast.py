"""The collision forecast (issue 56): tomorrow's collisions of inference with batch, how likely, how
bad, the change tonight that avoids each, and the forecast scored on its own past.

On the shared three-day morning store (``morning_db``: Monday to Wednesday, the nightly fine-tune
each night): the forecast made at 18:00 on Tuesday and its 07:00 update on Wednesday share one
calibration (the days before the last midnight), and the store's end (what the CLI, the page and
the review forecast by default) another. The rest is synthetic and cheap. ``bench/forecast.py``
runs the issue's 21-day stores over 8 seeds; ``docs/verdicts.md`` has its numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import isolated_cli, metric
from test_app_pages import build_store

from analytics.cli import main
from analytics.events import EventsConfig
from analytics.events.pipeline import analyse_timelines
from analytics.forecast import forecast
from analytics.forecast.action import actions_for
from analytics.forecast.frames import DAY_MS, known_at, store_frames
from analytics.forecast.hindcast import backtest, observed_collisions
from analytics.forecast.outcomes import day_outcomes
from analytics.forecast.runs_ahead import batch_outlook, quantile_levels
from analytics.forecast.skill import brier, brier_parts
from analytics.grafana import forecast_annotations
from analytics.ranges import RangeCalibration
from analytics.rhythm import norm_ahead
from analytics.slo import SloTable
from analytics.store import Store
from analytics.timeline import Timelines
from analytics.times import iso_utc as _iso
from analytics.whatif.observe import BatchRun, Observation

APP = Path(__file__).resolve().parent.parent / "app.py"
MONDAY = 1_791_158_400_000  # 2026-10-05 00:00 UTC, the sample's first step's day
SLO = SloTable.from_ms({"chat-vllm": 1000.0, "recommender": 100.0, "*": 100.0})
TUESDAY_18 = MONDAY + DAY_MS + 18 * 3_600_000
WEDNESDAY_07 = MONDAY + 2 * DAY_MS + 7 * 3_600_000
WEDNESDAY = "2026-10-07"


@pytest.fixture(scope="module")
def tl(morning_db: Path) -> Timelines:
    with Store(str(morning_db), read_only=True) as st:
        return store_frames(st)


@pytest.fixture(scope="module")
def evening(tl):
    fc = forecast(tl, slos=SLO, at_ms=TUESDAY_18)
    actions_for(fc)
    return fc


@pytest.fixture(scope="module")
def events(tl):
    return analyse_timelines(tl, EventsConfig(), slos=SLO)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


def _day(fc, day: str):
    return next(d for d in fc.days if d.day == day)


# -- on the store ----------------------------------------------------------------------------------
def test_the_evening_forecast_names_the_collision_that_came(evening, events) -> None:
    """At 18:00 on Tuesday: Wednesday's nightly run is a chance (it ran Monday and Tuesday), and the
    window the what-if replays for it is where the store's own tail event blamed on batch came."""
    wed = _day(evening, WEDNESDAY)
    run = next(r for r in evening.runs if r.day * DAY_MS == MONDAY + 2 * DAY_MS)
    assert run.workload == "nightly-finetune" and not run.running and 0.5 < run.probability < 1.0
    assert wed.collision_probability == pytest.approx(run.probability, abs=1e-9)  # it collides whenever it runs
    assert wed.windows and all(w.runs == ["nightly-finetune"] for w in wed.windows)
    came = [(t, s) for t, s in observed_collisions(events) if WEDNESDAY in _iso(t)]
    assert came, "the store's Wednesday has a tail event with batch's share"
    for w in wed.windows:
        if any(s == w.service for _, s in came):
            assert any(abs(t - w.start_ms) <= 3_600_000 for t, s in came if s == w.service)
    assert wed.minutes_range[0] <= wed.minutes_expected <= wed.minutes_range[1]
    assert not wed.calibrated and "not yet scored" in evening.range_basis


def test_the_0700_update_knows_the_run_has_started(tl, evening) -> None:
    """At 07:00 the run holds the GPUs: a yes for the morning (the 18:00 forecast said a chance), and
    the same calibration (the days before the last midnight) replayed on what it now knows."""
    morning = forecast(tl, slos=SLO, at_ms=WEDNESDAY_07)
    run = next(r for r in morning.runs if r.running)
    assert run.probability == 1.0 and run.start_ms < WEDNESDAY_07
    assert _day(morning, WEDNESDAY).collision_probability > 0.95 > _day(evening, WEDNESDAY).collision_probability


def test_a_forecast_reads_nothing_after_its_moment(tl, evening) -> None:
    """The forecast at 18:00 on the whole store equals the forecast on the store cut at 18:00."""
    cut = forecast(known_at(tl, 60, TUESDAY_18), slos=SLO, at_ms=TUESDAY_18)
    got, want = evening.as_json(), cut.as_json()
    want["actions"] = got["actions"]  # the fixture's forecast also has its actions
    assert got == want


def test_the_recommended_change_tonight_avoids_the_collision(evening) -> None:
    acts = [a for a in evening.actions if a.day == WEDNESDAY]
    assert {a.kind for a in acts} >= {"earlier", "cap"}
    best = [a for a in acts if a.recommended]
    assert len(best) == 1 and best[0].avoids and best[0].probability_after <= 0.1
    # the smallest: no other change that avoids it costs batch fewer GPU-hours
    cost = best[0].gpu_hours_delayed + best[0].gpu_hours_lost
    assert all(a.gpu_hours_delayed + a.gpu_hours_lost >= cost for a in acts if a.avoids)
    assert best[0].probability_before == pytest.approx(_day(evening, WEDNESDAY).collision_probability)
    earlier = next(a for a in acts if a.kind == "earlier")
    # starting earlier delays no batch work, it ends as many hours earlier as it started
    assert earlier.amount > 0 and earlier.gpu_hours_delayed == 0 and earlier.end_moves_h == pytest.approx(-earlier.amount)
    cap = next(a for a in acts if a.kind == "cap")
    assert cap.gpu_hours_delayed > 0 and cap.end_moves_h > 0  # fewer GPUs: the same work runs longer


def test_the_backtest_scores_each_day_beside_the_baselines(tl, events) -> None:
    bt = backtest(tl, slos=SLO, events=events, min_history_days=1.5)
    assert [r.day for r in bt.rows] == [WEDNESDAY]
    row = bt.rows[0].as_json()
    assert {"day", "collision_probability", "collision_observed", "minutes_forecast", "minutes_range",
            "minutes_observed", "update_0700"} <= set(row)
    assert row["collision_observed"] is True and row["update_0700"]["collision_observed"] is True
    # both earlier days ran the nightly job and collided: base rate and last week (none yet) say 1
    assert row["baseline_weekday_rate"] == 1.0 and row["baseline_last_week"] is None
    s = bt.scores
    assert s["brier"]["evening"] == pytest.approx((1 - row["collision_probability"]) ** 2)
    assert s["brier"]["morning"] < s["brier"]["evening"]
    assert s["coverage"]["evening"]["traffic_band"]["n"] > 0


def test_cli_forecast_json_and_backtest(morning_db: Path, capsys) -> None:
    """``tidelens forecast``: the JSON of the evening's forecast; ``--backtest`` one row per day."""
    assert main(["forecast", "--db", str(morning_db), "--at", _iso(TUESDAY_18), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["forecast"]
    assert [d["day"] for d in out["days"]] == ["2026-10-06", WEDNESDAY, "2026-10-08"]
    wed = out["days"][1]
    assert wed["windows"] and wed["collision_probability"] > 0.5 and wed["range_calibrated"] is False
    assert any(a["recommended"] for a in out["actions"])
    assert main(["forecast", "--db", str(morning_db), "--at", _iso(WEDNESDAY_07), "--backtest",
                 "--history-days", "1.5", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert [d["day"] for d in scored["days"]] == [WEDNESDAY] and "brier" in scored["scores"]
    assert main(["forecast", "--db", str(morning_db), "--at", _iso(TUESDAY_18), "--horizon", "1d"]) == 0
    text = capsys.readouterr().out
    assert "chance of a collision with batch" in text and "The smallest change tonight" in text


def test_cli_forecast_refuses_a_moment_outside_the_store(morning_db: Path, capsys) -> None:
    assert main(["forecast", "--db", str(morning_db), "--at", "2027-01-01T00:00Z"]) == 2
    err = capsys.readouterr().err
    assert "--at 2027-01-01T00:00:00Z" in err and "store's span" in err


@pytest.mark.parametrize(("flags", "words"), [
    (["--horizon", "nan"], "--horizon 'nan': write hours"), (["--horizon", "400h"], "forecast 1 to 168 hours"),
    (["--history-days", "nan"], "--history-days nan: give 1 to 90 days"), (["--step", "7s"], "divide an hour"),
    (["--tz", "Mars/Olympus"], "--tz 'Mars/Olympus' is not an IANA time zone"),
    (["--at", "now+9999999999999999999999d"], "no time between the years 1 and 9999")])
def test_cli_forecast_refuses_what_no_forecast_has(tmp_path: Path, capsys, flags: list[str], words: str) -> None:
    """Every flag bounded before the store is read, the refusal one JSON object with ``--json``."""
    assert main(["forecast", "--db", str(tmp_path / "none.duckdb"), *flags, "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["error"] and words in doc["error"], doc


def test_grafana_annotations_lie_ahead_and_are_updated_not_duplicated(evening) -> None:
    notes = forecast_annotations(evening)
    assert len(notes) == len(evening.windows()) > 0
    for n, w in zip(notes, evening.windows()):
        assert n["time"] > evening.at_ms and n["timeEnd"] > n["time"]
        assert "tidelens-forecast" in n["tags"] and f"service:{w.service}" in n["tags"]
        # one tag per service and day: tomorrow's 07:00 forecast posts onto the same annotation
        assert f"tidelens-event:forecast-{w.service}-{w.day.replace('-', '')}" in n["tags"]
        assert f"{w.probability:.0%} chance" in n["text"]


def test_the_forecast_page_shows_tomorrow_and_the_change_tonight(morning_db: Path, evening) -> None:
    """The page on a view ending at 18:00 on Tuesday: the library's forecast of Wednesday, its
    windows and the recommended change tonight."""
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"source": "duckdb", "db": str(morning_db), "end": _iso(TUESDAY_18)})
    at.run()
    at.switch_page("pages/forecast.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Forecast"
    wed = _day(evening, WEDNESDAY)
    assert metric(at, f"Collision, {WEDNESDAY}") == f"{wed.collision_probability:.0%}"
    best = next(a for a in evening.actions if a.recommended)
    assert metric(at, "Change tonight") == best.kind
    text = " ".join(m.value for m in at.markdown)
    assert "chance of a collision with batch" in text and "The smallest change tonight" in text


def test_export_grafana_forecast_says_why_a_store_has_none(tmp_path: Path, capsys) -> None:
    """``export grafana --forecast`` on an hour of data: the events and the dashboard are written, and
    the report says why there is no forecast to annotate (it needs a day and a half)."""
    db = build_store(tmp_path / "hour.duckdb")
    assert main(["export", "grafana", "--db", str(db), "--out", str(tmp_path / "g"), "--forecast", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["forecast"].startswith("no forecast annotations: --at ") and "a forecast needs 1.5" in report["forecast"]
    written = json.loads((tmp_path / "g" / "annotations.json").read_text())
    assert not any("tidelens-forecast" in a["tags"] for a in written)


# -- synthetic -------------------------------------------------------------------------------------
def _observation(lengths_h: list[float], *, running_h: float | None, days: int = 6) -> Observation:
    """A pool whose nightly workload ran at 02:00 each day for ``lengths_h``, and (``running_h``)
    runs now, at the last step, since 02:00 of the last day."""
    step_s = 600
    n = days * 144 + (int(running_h * 6) + 12 if running_h is not None else 0)
    ts = MONDAY + np.arange(1, n + 1, dtype=np.int64) * step_s * 1000
    runs = [BatchRun("nightly", "ml", d * 144 + 12, d * 144 + 12 + int(h * 6), 48) for d, h in enumerate(lengths_h)]
    if running_h is not None:
        runs.append(BatchRun("nightly", "ml", days * 144 + 12, n, 48))
    z = np.zeros(n)
    return Observation("svc", "default", step_s, ts, z + 1, z, z + 1, z + 1, z, z, z, z, z + 64, runs=runs)


def test_a_running_runs_end_narrows_as_it_outlives_its_past() -> None:
    """At 07:00 a run that has held the GPUs for five hours has only its longer past runs left to be;
    at 06:00 with seven hours behind it, only the longest."""
    lengths = [6.0, 7.0, 8.0, 9.0, 10.0]
    levels = quantile_levels(5)
    early = batch_outlook(_observation(lengths, running_h=3.0), np.array([0]), levels)
    late = batch_outlook(_observation(lengths, running_h=8.5), np.array([0]), levels)
    at_early, at_late = (o.runs[0] for o in (early, late))
    assert at_early.running and at_late.running
    total_early = [(e - at_early.start_ms) / 3_600_000 for e in at_early.ends_ms]
    total_late = [(e - at_late.start_ms) / 3_600_000 for e in at_late.ends_ms]
    # the lengths it can still reach: all of them early, only 9 and 10 h once it has run 8.5
    assert min(total_early) < 7.0 and min(total_late) >= 9.0 - 1 / 6 and max(total_late) <= 10.0 + 1 / 6
    assert max(total_late) - min(total_late) < max(total_early) - min(total_early)


def test_a_days_outcomes_weigh_each_run_by_its_chance() -> None:
    obs = _observation([8.0, 8.5, 9.0, 8.0, 8.5], running_h=None)
    ahead = obs.ts_ms[-1] + np.arange(1, 36 * 6) * 600_000
    out = batch_outlook(obs, ahead, quantile_levels(4))
    mine = [r for r in out.runs if r.workload == "nightly"]
    assert mine and all(0 < r.probability < 1 for r in mine)
    day = mine[0].day
    outcomes, _ = day_outcomes(out.runs, day, 4)
    assert sum(o.weight for o in outcomes) == pytest.approx(1.0)
    absent = sum(o.weight for o in outcomes if not any(out.runs[i].day == day for i, _ in o.ends))
    assert absent == pytest.approx(1 - mine[0].probability)


def test_the_rhythm_carried_ahead_keeps_weekends_apart() -> None:
    """Traffic ahead is the typical day of its kind at the recent level: a Saturday ahead is the past
    Saturdays' and Sundays', not the weekdays', and the recent level scales it."""
    t = MONDAY + np.arange(1, 14 * 144 + 1, dtype=np.int64) * 600_000
    weekend = ((t - 1) // DAY_MS + 3) % 7 >= 5
    day = 10 + 8 * np.sin(2 * np.pi * ((t - 1) % DAY_MS) / DAY_MS)
    rps = np.where(weekend, 0.5, 1.0) * day * np.where(t > t[-1] - DAY_MS, 1.1, 1.0)  # the last day 10% up
    f = pl.DataFrame({"ts": pl.Series(t).cast(pl.Datetime("ms", "UTC")), "rps": rps})
    ahead = MONDAY + 19 * DAY_MS + np.arange(1, 145, dtype=np.int64) * 600_000  # a Saturday
    got = norm_ahead(f, "rps", ahead)
    want = 0.5 * 1.1 * (10 + 8 * np.sin(2 * np.pi * ((ahead - 1) % DAY_MS) / DAY_MS))
    assert np.abs(got["expected"].to_numpy() - want).max() < 0.3


def test_the_conformal_widening_covers_eighty_percent_and_is_numpys_quantile() -> None:
    """Split conformal on scaled scores, each tail apart: each tail's rank is numpy's inverted-CDF
    quantile at ceil((n+1)0.9)/n, and ranges far too narrow (and off-centre) for their outcomes come
    out covering about 80% of new ones, about half of the misses on each side."""
    rng = np.random.default_rng(3)
    y_past, y_new = rng.normal(50, 20, 200), rng.normal(50, 20, 4000)
    lo, hi = np.full(200, 55.0), np.full(200, 65.0)
    cal = RangeCalibration.fit(lo, hi, y_past, floor=1.0)
    level = math.ceil(201 * 0.9) / 200
    assert cal.q_lo == pytest.approx(np.quantile((lo - y_past) / 10.0, level, method="inverted_cdf"))
    assert cal.q_hi == pytest.approx(np.quantile((y_past - hi) / 10.0, level, method="inverted_cdf"))
    a, b = cal.apply(55.0, 65.0, lower_bound=-math.inf)
    inside = (y_new >= a) & (y_new <= b)
    assert 0.75 <= float(np.mean(inside)) <= 0.86
    assert abs(float(np.mean(y_new < a)) - float(np.mean(y_new > b))) < 0.04


def test_brier_is_murphys_decomposition() -> None:
    p = np.repeat([0.05, 0.2, 0.6, 0.95], 25)
    y = (np.random.default_rng(1).random(100) < p).astype(float)
    parts = brier_parts(p, y)
    assert brier(p, y) == pytest.approx(parts["reliability"] - parts["resolution"] + parts["uncertainty"])
