"""Overview KPIs on hand-made timelines whose answers are known by arithmetic."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.overview import (WORKLOAD_CLASSES, class_long, slo_violations,
                                summarise)
from analytics.slo import SloTable

STEP_S = 300  # 5-minute steps: each GPU-step is 1/12 GPU-hour


def _pool() -> pl.DataFrame:
    # Two pools over three steps. Pool a: 8 GPUs; pool b: 4 GPUs (2 idle at step 3).
    return pl.DataFrame({
        "ts": [300_000, 600_000, 900_000] * 2,
        "pool": ["a"] * 3 + ["b"] * 3,
        "gpus_total": [8.0, 8, 8, 4, 4, 4],
        "gpus_inference": [2.0, 4, 6, 0, 0, 0],
        "gpus_batch": [6.0, 4, 2, 4, 4, 2],
        "gpus_other": [0.0, 0, 0, 0, 0, 0],
        "gpus_unknown": [0.0, 0, 0, 0, 0, 0],
        "gpus_idle": [0.0, 0, 0, 0, 0, 2],
        "activity_pct": [50.0, 50, 50, 20, None, 20],
    })


def _holdings() -> pl.DataFrame:
    return pl.DataFrame({
        "ts": [300_000, 300_000, 600_000, 600_000, 900_000, 900_000, 300_000, 600_000, 900_000],
        "pool": ["a"] * 6 + ["b"] * 3,
        "cls": ["inference", "batch"] * 3 + ["batch"] * 3,
        "team": ["serving", "ml"] * 3 + ["ml"] * 3,
        "workload": ["chat", "ft"] * 3 + ["ft"] * 3,
        "gpus": [2.0, 6, 4, 4, 6, 2, 4, 4, 2],
    })


def _services() -> pl.DataFrame:
    return pl.DataFrame({
        "ts": [300_000, 600_000, 900_000] * 2,
        "service": ["chat"] * 3 + ["rec"] * 3,
        "p99_ms": [90.0, 150.0, None, 40.0, 60.0, 200.0],
    })


_slo = SloTable.from_ms({"chat": 100.0, "rec": 50.0})


def test_summary_kpis() -> None:
    s = summarise(_pool(), _holdings(), _services(), _slo, STEP_S)
    assert s.steps == 3
    assert s.pool_gpus_max == 12 and s.pool_gpus_mean == 12
    assert s.gpu_hours == pytest.approx(36 / 12)  # 36 GPU-steps of 5 minutes
    assert s.allocation_pct == pytest.approx(100 * 34 / 36)  # 2 idle GPU-steps
    # GPU-weighted, the null left out: (3*8*50 + 2*4*20) / (3*8 + 2*4)
    assert s.activity_pct == pytest.approx((1200 + 160) / 32)
    # chat breaks 100 ms once (the null step is unknown, not violating); rec breaks 50 ms twice.
    assert s.slo_violation_min_by_service == {"chat": 5.0, "rec": 10.0}
    # Steps 2 and 3 have some violation: 10 minutes of the range, not 15.
    assert s.slo_violation_min == 10.0


def test_class_and_team_shares_add_up() -> None:
    s = summarise(_pool(), _holdings(), _services(), _slo, STEP_S)
    share = dict(s.class_share.select("cls", "share").iter_rows())
    assert list(share) == list(WORKLOAD_CLASSES)
    assert share["inference"] == pytest.approx(12 / 36)
    assert share["batch"] == pytest.approx(22 / 36)
    assert share["idle"] == pytest.approx(2 / 36)
    assert sum(share.values()) == pytest.approx(1.0)
    teams = {t: (c, sh) for t, c, _, sh in s.team_share.iter_rows()}
    assert teams["ml"] == ("batch", pytest.approx(22 / 36))
    assert teams["serving"] == ("inference", pytest.approx(12 / 36))
    assert s.team_share["team"].to_list() == ["ml", "serving"]  # largest first


def test_empty_timelines_give_empty_kpis() -> None:
    empty_pool = _pool().clear()
    s = summarise(empty_pool, _holdings().clear(), _services().clear(), _slo, STEP_S)
    assert s.steps == 0 and s.gpu_hours == 0 and s.allocation_pct is None
    assert s.activity_pct is None and s.slo_violation_min == 0
    assert s.team_share.height == 0


def test_slo_violations_frame() -> None:
    v = slo_violations(_services(), _slo, STEP_S)
    assert v.filter("violating").select("service", "ts").rows() == [
        ("chat", 600_000), ("rec", 600_000), ("rec", 900_000)]


def test_class_long_sums_pools() -> None:
    long = class_long(_pool())
    at3 = dict(long.filter(pl.col("ts") == 900_000).select("cls", "gpus").iter_rows())
    assert at3 == {"inference": 6, "batch": 4, "other": 0, "unknown": 0, "idle": 2}
    assert long.group_by("ts").agg(pl.col("gpus").sum())["gpus"].to_list() == [12.0] * 3


def test_whatif_story_data_keeps_both_kinds_of_rows() -> None:
    from analytics.overview import pool_story_data

    classes = class_long(_pool())
    v = slo_violations(_services(), _slo, STEP_S)
    both = pool_story_data(classes, v)
    assert both.height == classes.height + v.height
    assert {"cls", "gpus", "service", "p99_ms"} <= set(both.columns)


def test_label_inventory_counts_series_and_values() -> None:
    from analytics.overview import label_inventory

    series = pl.DataFrame({"labels": ['{"gpu":"0","pod":"a"}', '{"gpu":"1","pod":"a"}',
                                      '{"gpu":"2"}']})
    inv = label_inventory(series)
    assert inv.rows() == [("gpu", 3, 3, "0, 1, 2"), ("pod", 2, 1, "a")]


def test_whatif_story_figure_uses_class_colours_and_one_time_axis() -> None:
    from analytics.charts.overview import pool_story_figure
    from analytics.charts.theme import CLASS_COLORS

    fig = pool_story_figure(class_long(_pool()), slo_violations(_services(), _slo, STEP_S),
                            tz="Europe/Berlin")
    stacked = {t.name: t.fillcolor for t in fig.data if t.stackgroup}
    # Only classes someone held are drawn, each in its own colour.
    assert stacked == {c: CLASS_COLORS[c] for c in ("inference", "batch", "idle")}
    lines = {t.name for t in fig.data if not t.stackgroup}
    assert {"chat p99", "chat SLO", "rec p99", "rec SLO"} <= lines
    assert fig.layout.xaxis2.matches == "x" or fig.layout.xaxis.matches == "x2"  # shared axis
    first = str(next(t for t in fig.data if t.name == "inference").x[0])
    assert first.startswith("1970-01-01T01:05") or first.startswith("1970-01-01 01:05")  # Berlin
    assert fig.layout.template.layout.font.size >= 16  # readable on a projector


def test_palette_is_distinct_and_complete() -> None:
    from analytics.charts.theme import CLASS_COLORS

    assert tuple(CLASS_COLORS) == WORKLOAD_CLASSES
    assert len(set(CLASS_COLORS.values())) == len(CLASS_COLORS)


def test_data_figures() -> None:
    from analytics.charts.data import coverage_figure, inventory_figure

    metrics = pl.DataFrame({"metric": ["a", "b"], "series": [3, 10], "samples": [30, 100]})
    assert list(inventory_figure(metrics).data[0].y) == ["b", "a"]  # most series first
    sources = pl.DataFrame({"name": ["x.prom", "bad.prom"], "status": ["loaded", "failed"],
                            "samples": [10, 0]}).with_columns(
        first_ts=pl.Series([1_735_689_600_000, None]).cast(pl.Datetime("ms")),
        last_ts=pl.Series([1_735_776_000_000, None]).cast(pl.Datetime("ms")))
    fig = coverage_figure(sources)
    assert [t.name for t in fig.data] == [None] and len(fig.data) == 1  # the failed one is left out


def test_thin_for_display_keeps_gpu_hours_and_tails() -> None:
    from analytics.overview import thin_for_display

    n = 10
    classes = pl.DataFrame({"ts": list(range(1, n + 1)) * 2, "cls": ["inference"] * n + ["batch"] * n,
                            "gpus": [1.0] * n + [float(i) for i in range(n)]})
    v = pl.DataFrame({"ts": list(range(1, n + 1)), "service": ["chat"] * n,
                      "p99_ms": [50.0] * 7 + [500.0, 50.0, 50.0], "slo_ms": [100.0] * n,
                      "violating": [False] * 7 + [True, False, False]})
    c2, v2, k = thin_for_display(classes, v, max_points=5)
    assert k == 2 and c2["ts"].n_unique() == 5
    # Mean GPUs per bucket times the bucket's steps gives back the GPU-steps.
    assert (c2.filter(pl.col("cls") == "batch")["gpus"].sum() * k) == classes.filter(
        pl.col("cls") == "batch")["gpus"].sum()
    assert v2["p99_ms"].max() == 500.0 and v2["violating"].sum() == 1
    assert v2.filter("violating")["ts"].to_list() == [8]  # the bucket (7, 8] ends at 8
    same = thin_for_display(classes, v, max_points=100)
    assert same[2] == 1 and same[0] is classes


def test_display_buckets_are_round() -> None:
    from analytics.overview import thin_for_display

    n = 30_240  # three weeks of minutes
    classes = pl.DataFrame({"ts": range(1, n + 1), "cls": ["batch"] * n, "gpus": [1.0] * n})
    _, _, k = thin_for_display(classes, pl.DataFrame(), max_points=720, step_s=60)
    assert k == 60  # 42 one-minute steps would do; an hour reads better
    _, _, k = thin_for_display(classes, pl.DataFrame(), max_points=720)
    assert k == 42
