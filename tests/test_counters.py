"""Counter increase/rate per step: resets, series starting and stopping mid-range, never negative."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.timeline import TimelineConfig
from analytics.timeline.counters import increase, rate


def _load(store, series, samples, name="c"):
    def parse(sink):
        sink.add_series(pl.DataFrame(series, schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8},
                                     orient="row"))
        sink.add_samples(pl.DataFrame(samples, schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64},
                                      orient="row"))
    store.load(name, "test", name, parse)


def _by_step(frame, sid):
    f = frame.filter(pl.col("series_id") == sid).sort("ts")
    return dict(zip((f["ts"].dt.epoch("ms") // 1000).to_list(), f["increase"].to_list()))


def _ids(store):
    s = store.series("reqs_total")
    return {lab: sid for sid, lab in zip(s["id"], s["labels"])}


def test_increase_carries_previous_sample_across_steps_and_handles_resets(store):
    # one sample per 60 s step: window-only increase would see nothing; here every delta counts
    _load(store, [(0, "reqs_total", '{"pod":"a"}')],
          [(0, 60_000, 10.0), (0, 120_000, 15.0), (0, 180_000, 3.0), (0, 240_000, 8.0)])
    sid = store.series("reqs_total")["id"][0]
    out = increase(store, "reqs_total", TimelineConfig(step_s=60))
    # first sample is the baseline; 15-10; reset -> 3 counts whole; 8-3
    assert _by_step(out, sid) == {60: 0.0, 120: 5.0, 180: 3.0, 240: 5.0}
    assert (out["increase"] >= 0).all()
    r = rate(store, [sid], TimelineConfig(step_s=60))
    assert r.filter(pl.col("ts").dt.epoch("ms") == 120_000)["rate"][0] == pytest.approx(5 / 60)


def test_steps_sum_to_whole_range_and_step_is_end_inclusive(store):
    _load(store, [(0, "reqs_total", '{"pod":"a"}')],
          [(0, 10_000, 1.0), (0, 60_000, 4.0), (0, 70_000, 9.0), (0, 120_000, 9.0), (0, 125_000, 2.0)])
    sid = store.series("reqs_total")["id"][0]
    out = increase(store, [sid], TimelineConfig(step_s=60))
    # (0,60]: 10s baseline, 60s +3 ; (60,120]: +5, +0 ; (120,180]: reset -> +2
    assert _by_step(out, sid) == {60: 3.0, 120: 5.0, 180: 2.0}
    whole = increase(store, [sid], TimelineConfig(step_s=600))
    assert whole["increase"].sum() == pytest.approx(10.0)


def test_series_starting_and_stopping_mid_range(store):
    _load(store, [(0, "reqs_total", '{"pod":"old"}'), (1, "reqs_total", '{"pod":"new"}')],
          [(0, 60_000, 100.0), (0, 120_000, 110.0),                    # stops after 120 s
           (1, 150_000, 7.0), (1, 180_000, 9.0), (1, 240_000, 20.0)])  # starts inside (120,180]
    ids = _ids(store)
    out = increase(store, "reqs_total", TimelineConfig(step_s=60))
    assert _by_step(out, ids['{"pod":"old"}']) == {60: 0.0, 120: 10.0}  # no rows after it stopped
    # a new series (first sample 90 s after the data began) counts from zero: 7 + 2
    assert _by_step(out, ids['{"pod":"new"}']) == {180: 9.0, 240: 11.0}


def test_series_present_when_data_begins_is_a_baseline(store):
    # both series exist from the start (within one scrape of each other): cumulative values are not increases
    _load(store, [(0, "reqs_total", '{"pod":"a"}'), (1, "reqs_total", '{"pod":"b"}')],
          [(0, 60_000, 1000.0), (0, 120_000, 1010.0), (1, 90_000, 500.0), (1, 120_000, 501.0)])
    ids = _ids(store)
    out = increase(store, "reqs_total", TimelineConfig(step_s=60))
    assert _by_step(out, ids['{"pod":"a"}']) == {60: 0.0, 120: 10.0}
    assert _by_step(out, ids['{"pod":"b"}']) == {120: 1.0}


def test_range_start_uses_baseline_before_it(store):
    _load(store, [(0, "reqs_total", '{"pod":"a"}')],
          [(0, 60_000, 1.0), (0, 120_000, 2.0), (0, 180_000, 6.0)])
    sid = store.series("reqs_total")["id"][0]
    out = increase(store, [sid], TimelineConfig(step_s=60, start_ms=150_000, end_ms=180_000))
    assert _by_step(out, sid) == {180: 4.0}


def test_empty_inputs_give_empty_frames(store):
    assert increase(store, "nothing_total", TimelineConfig()).height == 0
    assert increase(store, [], TimelineConfig()).columns == ["series_id", "ts", "increase", "rate"]


def _random_counters(store, rng, n_series=12, minutes=90, scrape_order=True):
    """Counters with resets, gaps, late starters and a NaN, loaded time-major (as a scrape archive)."""
    series = [(k, "reqs_total", f'{{"pod": "p{k}"}}') for k in range(n_series)]
    samples = []
    for k in range(n_series):
        start = 0 if k % 3 else int(rng.integers(2, 30))
        v = 0.0
        for m in range(start, minutes):
            if rng.random() < 0.1:
                continue  # a missed scrape
            v = float(rng.integers(0, 5)) if rng.random() < 0.03 else v + float(rng.integers(0, 20))
            samples.append((k, m * 60_000 + int(rng.integers(0, 59_000)), v))
    samples.append((0, minutes * 60_000 + 1, float("nan")))
    if scrape_order:
        samples.sort(key=lambda r: r[1])
    _load(store, series, samples)


@pytest.mark.parametrize("scrape_order", [True, False])
@pytest.mark.parametrize("step_s", [60, 300])
@pytest.mark.parametrize("chunked", [False, True])
def test_increase_by_group_in_numpy_equals_the_sql_definition(store, monkeypatch, scrape_order, step_s, chunked):
    import numpy as np

    import analytics.timeline.counters as counters
    from analytics.sql import timeline as q
    from analytics.timeline.counters import LOOKBACK_MS, NEW_SERIES_AFTER_MS, increase_by_group, register_temp

    if chunked:  # several chunks of series, and the sparse sums
        monkeypatch.setattr(counters, "CHUNK_SAMPLES", 150)
        monkeypatch.setattr(counters, "DENSE_CELLS", 0)

    _random_counters(store, np.random.default_rng(step_s), scrape_order=scrape_order)
    ids = store.series("reqs_total")["id"].sort()
    groups = pl.DataFrame({"series_id": ids, "group_id": (ids % 4) * 10}, schema={"series_id": pl.Int64,
                                                                                 "group_id": pl.Int64})
    step_ms = step_s * 1000
    for lo_ms, hi_ms in ((0, 91 * 60_000), (20 * 60_000, 50 * 60_000)):
        got = increase_by_group(store, groups, step_ms, lo_ms, hi_ms)
        register_temp(store, "tl_counter_series", groups)
        want = store.query(q.COUNTER_INCREASE_BY_GROUP, {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms,
                                                         "lookback_ms": LOOKBACK_MS,
                                                         "new_after_ms": NEW_SERIES_AFTER_MS})
        assert got.height == want.height > 0
        assert got["group_id"].to_list() == want["group_id"].to_list()
        assert got["ts_end_ms"].to_list() == want["ts_end_ms"].to_list()
        assert np.allclose(got["increase"].to_numpy(), want["increase"].to_numpy(), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("case", ["dense", "duplicate bounds", "ragged", "string keys", "nan counts"])
def test_histogram_quantiles_fast_path_equals_general_path(monkeypatch, case):
    import math

    import numpy as np
    from polars.testing import assert_frame_equal

    import analytics.timeline.counters as counters

    rng = np.random.default_rng(3)
    les = [0.0, 0.05, 0.1, 0.5, 1.0, math.inf]
    rows = []
    for svc in range(3):
        for step in range(40):
            bounds = les[: 3 + step % 4] + [math.inf] if case == "ragged" else les
            counts = np.cumsum(rng.integers(0, 5, len(bounds))).astype(float)
            if step % 7 == 0:
                counts[:] = 0.0  # no observations: NaN
            if step % 5 == 1:
                counts[2] = counts[1] - 3  # not monotonic
            if case == "nan counts" and step % 3 == 0:
                counts[1] = math.nan
            rows += [(svc, step * 60_000, le, c) for le, c in zip(bounds, counts)]
            if case == "duplicate bounds":
                rows += [(svc, step * 60_000, le, c / 2) for le, c in zip(bounds, counts)]
    b = pl.DataFrame(rows, schema={"svc": pl.Int64, "ts": pl.Int64, "le": pl.Float64, "value": pl.Float64},
                     orient="row").sample(fraction=1.0, shuffle=True, seed=1)
    if case == "string keys":
        b = b.with_columns(pl.format("s{}", "svc").alias("svc"))
    qs = {"p0": 0.0, "p50": 0.5, "p99": 0.99, "p1": 1.0, "bad": 1.5}
    one = b.filter((pl.col("ts") == 60_000) & (pl.col("svc") == pl.col("svc").first())).drop("svc", "ts")
    fast, fast_one = counters.histogram_quantiles(qs, b), counters.histogram_quantiles(qs, one)
    monkeypatch.setattr(counters, "_quantiles_dense", lambda *a: None)
    general = counters.histogram_quantiles(qs, b)
    assert fast.height == 120 and fast["p99"].is_nan().sum() > 0 and fast["p99"].is_not_nan().sum() > 60
    assert_frame_equal(fast, general, check_exact=False, rel_tol=1e-12)
    assert fast_one.height == 1
    assert_frame_equal(fast_one, counters.histogram_quantiles(qs, one), check_exact=False, rel_tol=1e-12)
