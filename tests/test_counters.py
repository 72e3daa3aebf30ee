"""Counter increase/rate per step: resets, series starting and stopping mid-range, never negative."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.counters import increase, rate
from analytics.timeline import TimelineConfig


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
