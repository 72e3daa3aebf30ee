"""Honest latency axes: every p99 panel is a log axis of milliseconds with labelled ticks
(1-2-5 per decade, or decades when wide), and its range holds both the p99s and the SLOs, so
an SLO line never merges with zero under a spike."""

from __future__ import annotations

import math

import polars as pl
import pytest

from analytics.charts.overview import pool_story_figure
from analytics.charts.theme import log_ms_ticks
from analytics.charts.whatif import backtest_figure, bands_figure, typical_day_figure
from analytics.whatif import PRESETS, compare
from analytics.whatif.ledger import typical_day
from analytics.slo import SloTable

T0 = 1_764_316_800_000


def _log_axis_ok(axis, *must_hold_ms: float) -> None:
    assert axis.type == "log"
    assert axis.ticktext and all(t.endswith(("ms", " s")) for t in axis.ticktext), axis.ticktext
    lo, hi = axis.range
    for ms in must_hold_ms:
        assert lo <= math.log10(ms) <= hi, (ms, axis.range)


def test_overview_p99_panel_is_log_and_holds_both_slos_under_a_13_s_spike() -> None:
    ts = pl.datetime_range(pl.datetime(2025, 11, 28), pl.datetime(2025, 11, 28, 1), "1m", eager=True,
                           time_zone="UTC")
    n = len(ts)
    p99 = [80.0] * n
    p99[30] = 13_000.0
    violations = pl.DataFrame({
        "ts": [*ts, *ts], "service": ["chat"] * n + ["rec"] * n, "p99_ms": p99 + [600.0] * n,
        "slo_ms": [100.0] * n + [1000.0] * n, "violating": [p > 100 for p in p99] + [False] * n})
    classes = pl.DataFrame({"ts": ts, "cls": ["inference"] * n, "gpus": [4.0] * n})
    fig = pool_story_figure(classes, violations)
    _log_axis_ok(fig.layout.yaxis2, 100, 1000, 13_000, 80)
    assert "100 ms" in fig.layout.yaxis2.ticktext and "1 s" in fig.layout.yaxis2.ticktext


def test_what_if_panels_are_log_with_units_and_hold_the_slo() -> None:
    scn = PRESETS["morning-ramp"](2)
    res = compare(scn, ("shared", "tidal"))
    day = typical_day(scn, res)
    _log_axis_ok(typical_day_figure(day, scn.service.slo_ms).layout.yaxis, scn.service.slo_ms)
    frame = pl.DataFrame({"ts_ms": [T0, T0 + 60_000], "observed_p99_ms": [50.0, 4000.0], "p99_ms": [60.0, 3000.0]})
    _log_axis_ok(backtest_figure(frame, 100.0).layout.yaxis, 100, 50, 4000)
    bands = pl.DataFrame({"ts_ms": [T0, T0 + 60_000], "p99_ms_p10": [40.0, 45.0], "p99_ms_p50": [60.0, 70.0],
                          "p99_ms_p90": [90.0, 95.0]})
    fig = bands_figure(bands, 250.0)
    _log_axis_ok(fig.layout.yaxis, 250, 40)
    assert not fig.layout.shapes  # the SLO is a named trace, not an hline
    assert any(t.name == "SLO 250 ms" for t in fig.data)


def test_ticks_read_as_units_never_as_bare_digits() -> None:
    vals, text = log_ms_ticks(3, 20_000)
    assert text == ["10 ms", "100 ms", "1 s", "10 s"] and vals == [10.0, 100.0, 1000.0, 10000.0]
    assert log_ms_ticks(80, 130)[1] == ["100 ms"]


def test_the_theme_assigned_unvalidated_is_the_template_plotly_would_validate() -> None:
    import plotly.graph_objects as go

    from analytics.charts.theme import TEMPLATE_NAME, apply_theme

    fig = apply_theme(go.Figure(go.Scatter(y=[1, 2])), title="t", height=300)
    validated = go.Figure(layout=dict(template=TEMPLATE_NAME))
    assert fig.layout.template.to_plotly_json() == validated.layout.template.to_plotly_json()
    assert fig.layout.template.layout.colorway == validated.layout.template.layout.colorway
    assert fig.layout._validate  # validation is back on for what the chart sets next
    with pytest.raises(ValueError):  # a bad value set after the theme is still refused
        fig.update_layout(height="tall")


def test_event_story_has_a_log_p99_row_and_one_band_over_the_event_on_every_row(simulated_store) -> None:
    from analytics.charts.events import CAUSE_COLORS, event_figure
    from analytics.charts.theme import display_ts
    from analytics.events.pipeline import analyse_store
    from analytics.store import Store

    db, tr = simulated_store("morning", days=2, gpus=64, seed=4)  # the session's one build
    with Store(db, read_only=True) as st:
        analysis = analyse_store(st, slos=SloTable.from_ms({k: v["p99_ms"] for k, v in tr["slos"].items()}))
    ev = max(analysis.events, key=lambda e: e.peak_p99_ms)
    fig = event_figure(analysis.event_window(ev), analysis.holdings_window(ev), ev, tz="Asia/Tokyo")
    _log_axis_ok(fig.layout.yaxis2, ev.slo_ms, ev.peak_p99_ms)
    (band,) = [s for s in fig.layout.shapes if s.type == "rect"]
    start, end = display_ts(pl.Series([ev.start_ms, ev.end_ms]), "Asia/Tokyo")
    # The rows share one time axis: a band the figure's whole height marks the event on each.
    assert (band.yref, band.y0, band.y1, band.xref) == ("paper", 0, 1, "x")
    assert (band.x0, band.x1) == (start, end) and band.fillcolor == CAUSE_COLORS[ev.cause]
    assert [fig.layout[f"xaxis{i}"].matches for i in ("", 2, 3, 4)] == ["x5"] * 4


def test_a_time_axis_gets_level_ticks_and_the_room_below_them() -> None:
    import datetime as dt

    import plotly.graph_objects as go

    from analytics.charts.theme import MARGIN_PX, TIME_AXIS_BOTTOM_PX, TIME_AXIS_TICKS, apply_theme

    t0 = dt.datetime(2026, 10, 6, 9)
    timed = apply_theme(go.Figure(go.Scatter(x=[t0, t0 + dt.timedelta(hours=3)], y=[1, 2])), title="t")
    assert (timed.layout.xaxis.nticks, timed.layout.xaxis.tickangle) == (TIME_AXIS_TICKS, 0)
    assert timed.layout.margin.b == TIME_AXIS_BOTTOM_PX
    # polars' datetimes reach Plotly as a numpy datetime64 array
    series = apply_theme(go.Figure(go.Scatter(x=pl.Series([t0]), y=[1])))
    assert series.layout.margin.b == TIME_AXIS_BOTTOM_PX
    plain = apply_theme(go.Figure(go.Bar(x=[1, 2], y=["a", "b"], orientation="h")))
    assert plain.layout.xaxis.nticks is None and plain.layout.margin.b is None
    assert plain.layout.template.layout.margin.l == MARGIN_PX["l"]
