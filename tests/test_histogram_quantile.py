"""histogram_quantile on hand-worked cases, with Prometheus' semantics."""

from __future__ import annotations

import math

import polars as pl
import pytest

from analytics.timeline.counters import histogram_quantile

INF = math.inf


def _q(q, les, counts, **keys):
    frame = pl.DataFrame({"le": les, "value": [float(c) for c in counts]})
    for k, v in keys.items():
        frame = frame.with_columns(pl.lit(v).alias(k))
    return histogram_quantile(q, frame)["quantile"][0]


def test_linear_inside_bucket_and_first_bucket_starts_at_zero():
    les = [0.1, 0.2, 0.4, INF]
    assert _q(0.5, les, [20, 60, 100, 100]) == pytest.approx(0.1 + 0.1 * (50 - 20) / 40)
    assert _q(0.1, les, [20, 60, 100, 100]) == pytest.approx(0.05)  # 10/20 of (0, 0.1]
    assert _q(0.99, les, [20, 60, 100, 100]) == pytest.approx(0.2 + 0.2 * (99 - 60) / 40)


def test_rank_in_inf_bucket_returns_highest_finite_bound():
    assert _q(0.99, [0.1, 0.2, INF], [10, 50, 100]) == pytest.approx(0.2)


def test_nan_cases_empty_single_and_missing_inf():
    assert math.isnan(_q(0.9, [0.1, 0.2, INF], [0, 0, 0]))     # no observations
    assert math.isnan(_q(0.9, [INF], [10]))                    # a single bucket
    assert math.isnan(_q(0.9, [0.1, 0.2], [5, 10]))            # no +Inf bucket
    assert _q(1.5, [0.1, INF], [1, 2]) == INF and _q(-1, [0.1, INF], [1, 2]) == -INF


def test_empty_buckets_in_between_and_non_monotonic_counts():
    # empty bucket (0.1, 0.2]: the rank lands in (0.2, 0.4]
    assert _q(0.5, [0.1, 0.2, 0.4, INF], [40, 40, 100, 100]) == pytest.approx(0.2 + 0.2 * 10 / 60)
    # a lower count above a higher bound (scrape skew) is raised, as Prometheus does
    assert _q(0.5, [0.1, 0.2, 0.4, INF], [40, 30, 100, 100]) == pytest.approx(0.2 + 0.2 * 10 / 60)


def test_vectorised_over_groups_and_duplicate_bounds_are_summed():
    b = pl.DataFrame({
        "svc": ["a", "a", "a", "a", "b", "b", "b"],
        "le": [0.1, INF, 0.1, INF, 1.0, 2.0, INF],
        "value": [5.0, 10.0, 5.0, 10.0, 0.0, 4.0, 4.0],  # "a": two pods' buckets summed
    })
    out = histogram_quantile(0.5, b)
    got = dict(zip(out["svc"], out["quantile"]))
    assert got["a"] == pytest.approx(0.1)              # 10 of 20 observations reached at le=0.1
    assert got["b"] == pytest.approx(1.0 + 1.0 * 2 / 4)


def test_counter_resets_and_pods_joining_mid_step_through_the_store(store):
    """Bucket increases per step summed over pods, then the quantile: one pod resets, one joins."""
    from analytics.timeline import TimelineConfig
    from analytics.timeline.counters import increase

    def parse(sink):
        series, samples = [], []
        k = 0
        for pod, les, pts in (
            ("p1", ["0.1", "0.5", "+Inf"], [(60_000, [0, 0, 0]), (120_000, [10, 10, 10]), (180_000, [2, 4, 4])]),
            ("p2", ["0.1", "0.5", "+Inf"], [(150_000, [0, 1, 2]), (180_000, [0, 4, 8])]),
        ):
            for i, le in enumerate(les):
                series.append((k, "lat_seconds_bucket", f'{{"le":"{le}","pod":"{pod}"}}'))
                samples += [(k, ts, float(v[i])) for ts, v in pts]
                k += 1
        sink.add_series(pl.DataFrame(series, schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}, orient="row"))
        sink.add_samples(pl.DataFrame(samples, schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}, orient="row"))

    store.load("h", "test", "h", parse)
    ser = store.series("lat_seconds_bucket").select(
        pl.col("id").alias("series_id"), pl.col("labels").str.json_path_match("$.le").cast(pl.Float64).alias("le"))
    inc = increase(store, "lat_seconds_bucket", TimelineConfig(step_s=60)).join(ser, on="series_id")
    step3 = inc.filter(pl.col("ts").dt.epoch("ms") == 180_000).select("le", pl.col("increase").alias("value"))
    # p1 reset 10 -> (2, 4, 4): counts (2, 4, 4); p2 is new at 150 s (90 s after the data began):
    # it counts from zero and adds (0, 4, 8)
    assert sorted(step3.group_by("le").agg(pl.col("value").sum()).rows()) == [(0.1, 2.0), (0.5, 8.0), (INF, 12.0)]
    # rank 0.5*12 = 6 lies in (0.1, 0.5]: 0.1 + 0.4 * (6-2)/(8-2)
    assert histogram_quantile(0.5, step3)["quantile"][0] == pytest.approx(0.1 + 0.4 * 4 / 6)
    # rank 0.99*12 lies in +Inf: the highest finite bound
    assert histogram_quantile(0.99, step3)["quantile"][0] == pytest.approx(0.5)
