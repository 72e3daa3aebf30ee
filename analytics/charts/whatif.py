"""What-if figures: the policies' typical day, the utilization/compliance frontier, headroom
by hour, p99 bands over random bursts, the backtest, and the chargeback bills."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from analytics.charts.theme import OKABE_ITO, SLO_COLOR, apply_theme, display_ts, log_ms_axis

_PALETTE = list(OKABE_ITO.values())


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def _slo_trace(fig: go.Figure, x: pl.Series, slo_ms: float) -> None:
    """The SLO as a named line (a trace: add_hline's annotation lands at 10^y on a log axis)."""
    if len(x):
        fig.add_trace(go.Scatter(x=[x.min(), x.max()], y=[slo_ms, slo_ms], mode="lines", name=f"SLO {slo_ms:g} ms",
                                 line=dict(color=SLO_COLOR, dash="dash"), hoverinfo="skip"))


def _titled(title: str, scope: str) -> str:
    """A figure's title with the scope its numbers are for (which service, what period).

    >>> _titled("A typical day under each policy", "chat-vllm"), _titled("Bills", "")
    ('A typical day under each policy: chat-vllm', 'Bills')
    """
    return f"{title}: {scope}" if scope else title


def typical_day_figure(day: pl.DataFrame, slo_ms: float, scope: str = "") -> go.Figure:
    """Median p99 by hour of day (UTC), one line per policy, against the SLO; ``scope`` names
    the service whose p99 it is."""
    fig = go.Figure()
    for i, pol in enumerate(day["policy"].unique(maintain_order=True).to_list()):
        part = day.filter(pl.col("policy") == pol)
        fig.add_trace(go.Scatter(x=part["hour"], y=part["p99_ms"], name=pol, mode="lines",
                                 line=dict(color=_color(i), width=2)))
    # A trace, not add_hline's annotation: that lands at 10^y on a log axis and stretches the
    # axis to 1e98 in a static (SVG/PNG) export.
    fig.add_trace(go.Scatter(x=[0, 24], y=[slo_ms, slo_ms], name=f"SLO {slo_ms:g} ms", mode="lines",
                             line=dict(color=SLO_COLOR, dash="dash"), hoverinfo="skip"))
    log_ms_axis(fig, [*day["p99_ms"].to_list(), slo_ms], title="p99 (median over days, log)")
    fig.update_xaxes(title="hour of day (UTC)", range=[0, 24], dtick=3)
    return apply_theme(fig, title=_titled("A typical day under each policy", scope), height=460)


def headroom_figure(head: pl.DataFrame, policy: str) -> go.Figure:
    """Largest surge absorbable within the SLO, by hour of day."""
    fig = go.Figure()
    fig.add_trace(go.Bar(x=head["hour"], y=head["max_surge_factor"], name="typical day",
                         marker_color=_color(2)))
    fig.add_trace(go.Scatter(x=head["hour"], y=head["worst_surge_factor"], name="worst day",
                             mode="markers", marker=dict(color=_color(5), size=9)))
    fig.add_hline(y=1.0, line=dict(color=SLO_COLOR, dash="dash"))
    fig.update_xaxes(title="hour of day (UTC)", dtick=3)
    fig.update_yaxes(title="surge factor within SLO")
    return apply_theme(fig, title=f"Burst headroom by hour ({policy})", height=400)


def bands_figure(bands: pl.DataFrame, slo_ms: float, tz: str = "UTC") -> go.Figure:
    """p99 bands (10-90%, median) over random burst seeds."""
    x = display_ts(pl.from_epoch(bands["ts_ms"], time_unit="ms").dt.replace_time_zone("UTC"), tz)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=bands["p99_ms_p90"], mode="lines", line=dict(width=0),
                             showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=bands["p99_ms_p10"], mode="lines", fill="tonexty",
                             line=dict(width=0), name="10-90% of seeds",
                             fillcolor="rgba(0,114,178,0.25)"))
    fig.add_trace(go.Scatter(x=x, y=bands["p99_ms_p50"], mode="lines", name="median",
                             line=dict(color=_color(1), width=1.5)))
    _slo_trace(fig, x, slo_ms)
    log_ms_axis(fig, [*bands["p99_ms_p10"].to_list(), *bands["p99_ms_p90"].to_list(), slo_ms], title="p99 (log)")
    return apply_theme(fig, title="p99 over random burst seeds", height=400)


def backtest_figure(frame: pl.DataFrame, slo_ms: float, tz: str = "UTC") -> go.Figure:
    """Observed vs replayed p99 over the observed period."""
    x = display_ts(pl.from_epoch(frame["ts_ms"], time_unit="ms").dt.replace_time_zone("UTC"), tz)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=frame["observed_p99_ms"], name="observed", mode="lines",
                             line=dict(color=_color(0), width=1)))
    fig.add_trace(go.Scatter(x=x, y=frame["p99_ms"], name="model (replay)", mode="lines",
                             line=dict(color=_color(5), width=1)))
    _slo_trace(fig, x, slo_ms)
    log_ms_axis(fig, [*frame["observed_p99_ms"].to_list(), *frame["p99_ms"].to_list(), slo_ms], title="p99 (log)")
    return apply_theme(fig, title="Backtest: observed vs replayed p99", height=400)


def next_gpus_figure(front: pl.DataFrame, scope: str = "") -> go.Figure:
    """What the next GPUs buy: violation minutes against the pool's GPU cost, one line per
    policy, a point per pool size (hover: GPUs, batch goodput); the pool as it is ringed;
    ``scope`` names the service whose minutes they are."""
    fig = go.Figure()
    for i, pol in enumerate(front["policy"].unique(maintain_order=True).to_list()):
        part = front.filter(pl.col("policy") == pol)
        fig.add_trace(go.Scatter(
            x=part["gpu_cost"], y=part["violation_minutes"], name=pol, mode="lines+markers",
            line=dict(color=_color(i), width=2),
            customdata=list(zip(part["gpus"].to_list(), part["batch_goodput_gpu_hours"].to_list())),
            hovertemplate=(f"{pol}<br>%{{customdata[0]:,.0f}} GPUs, $%{{x:,.0f}}<br>%{{y:,.0f}} violation "
                           "minutes<br>batch goodput %{customdata[1]:,.0f} GPU-h<extra></extra>")))
    now = front.filter(pl.col("current"))
    if now.height:
        fig.add_trace(go.Scatter(x=now["gpu_cost"], y=now["violation_minutes"], mode="markers",
                                 name="the pool as it is", hoverinfo="skip",
                                 marker=dict(size=16, symbol="circle-open", color="#000000",
                                             line=dict(width=2))))
    fig.update_xaxes(title="GPU cost over the period ($)", tickprefix="$", separatethousands=True)
    fig.update_yaxes(title="minutes over the SLO (modelled)", separatethousands=True, rangemode="tozero")
    return apply_theme(fig, title=_titled("What the next GPUs buy: half to 1.5x the pool", scope), height=460)


def bills_figure(bills: pl.DataFrame, scope: str = "") -> go.Figure:
    """What each team pays under each policy: GPU cost and externality, stacked by team;
    ``scope`` names the service whose replay it is."""
    fig = go.Figure()
    teams = bills["team"].unique(maintain_order=True).to_list()
    for i, team in enumerate(teams):
        part = bills.filter(pl.col("team") == team)
        fig.add_trace(go.Bar(x=part["policy"], y=part["gpu_cost"], name=f"{team}: GPUs",
                             marker_color=_color(i)))
        fig.add_trace(go.Bar(x=part["policy"], y=part["externality_cost"],
                             name=f"{team}: violations caused", marker_color=_color(i),
                             marker_pattern_shape="/"))
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title="$ over the period")
    return apply_theme(fig, title=_titled("What each team pays, by policy", scope), height=460)
