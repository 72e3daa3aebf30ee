"""Overview figures: the pool's GPUs by class over time with inference p99 against the SLO
on the same time axis, and the GPU-hour shares by class and by team."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics.charts.theme import (SERVICE_COLORS, SLO_COLOR, apply_theme, class_color, log_ms_axis,
                                    display_ts, zone_label)
from analytics.timeline.config import CLASS_COLUMNS as WORKLOAD_CLASSES  # the order every chart stacks the classes in


def pool_story_figure(classes: pl.DataFrame, violations: pl.DataFrame, *, tz: str = "UTC",
                      height: int = 640) -> go.Figure:
    """GPUs held by class (stacked) above inference p99 and its SLO, sharing the time axis.

    Parameters
    ----------
    classes:
        ``ts, cls, gpus`` (:func:`analytics.overview.class_long`).
    violations:
        ``ts, service, p99_ms, slo_ms, violating`` (:func:`analytics.overview.slo_violations`).
    tz:
        Display zone of the time axis.
    """
    has_latency = violations.height > 0
    fig = make_subplots(rows=2 if has_latency else 1, cols=1, shared_xaxes=True,
                        vertical_spacing=0.08, row_heights=[0.6, 0.4] if has_latency else [1.0],
                        subplot_titles=("GPUs held, by workload class",
                                        "Inference p99 vs SLO") if has_latency else None)
    for cls in WORKLOAD_CLASSES:
        part = classes.filter(pl.col("cls") == cls).sort("ts")
        if part.height == 0 or not (part["gpus"].fill_null(0) > 0).any():
            continue  # a class nobody held adds a legend entry and nothing else
        color = class_color(cls)
        fig.add_trace(go.Scatter(
            x=display_ts(part["ts"], tz), y=part["gpus"], name=cls, mode="lines",
            stackgroup="gpus", line=dict(width=0.5, color=color), fillcolor=color,
            legendgroup="classes", hovertemplate="%{y:.1f} GPUs<extra>" + cls + "</extra>"),
            row=1, col=1)
    fig.update_yaxes(title_text="GPUs", rangemode="tozero", row=1, col=1)
    if has_latency:
        services = sorted(violations["service"].unique().to_list())
        for i, service in enumerate(services):
            part = violations.filter(pl.col("service") == service).sort("ts")
            x = display_ts(part["ts"], tz)
            color = SERVICE_COLORS[i % len(SERVICE_COLORS)]
            fig.add_trace(go.Scatter(
                x=x, y=part["p99_ms"], name=f"{service} p99", mode="lines",
                line=dict(width=2.5, color=color), legendgroup="latency",
                hovertemplate="%{y:.0f} ms<extra>" + service + " p99</extra>"), row=2, col=1)
            fig.add_trace(go.Scatter(
                x=x, y=part["slo_ms"], name=f"{service} SLO", mode="lines",
                line=dict(width=2, color=SLO_COLOR, dash=("dash", "dot", "dashdot")[i % 3]),
                legendgroup="latency", hovertemplate="SLO %{y:.0f} ms<extra>" + service + "</extra>"),
                row=2, col=1)
            bad = part.filter("violating")
            if bad.height:
                fig.add_trace(go.Scatter(
                    x=display_ts(bad["ts"], tz), y=bad["p99_ms"], name=f"{service} above SLO",
                    mode="markers", marker=dict(symbol="x", size=8, color=SLO_COLOR),
                    legendgroup="latency", showlegend=False,
                    hovertemplate="%{y:.0f} ms, above SLO<extra>" + service + "</extra>"),
                    row=2, col=1)
        # Log scale: a 13 s spike on a linear axis flattened 100 ms and 1 s SLOs onto zero.
        log_ms_axis(fig, [*violations["p99_ms"].to_list(), *violations["slo_ms"].to_list()],
                    title="p99 (log)", row=2, col=1)
    fig.update_xaxes(title_text=f"time ({zone_label(tz)})", row=2 if has_latency else 1, col=1)
    # The legend sits above the subplot titles, clear of them.
    fig.update_layout(hovermode="x unified", legend_traceorder="normal",
                      legend=dict(y=1.1, yanchor="bottom"), margin=dict(t=140))
    return apply_theme(fig, height=height)


def share_figure(class_share: pl.DataFrame, team_share: pl.DataFrame, *,
                 height: int = 380) -> go.Figure:
    """Share of the pool's GPU-hours by class (left) and by team (right), in class colours."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("GPU-hours by class", "GPU-hours by team"),
                        horizontal_spacing=0.18)
    cs = class_share.filter(pl.col("gpu_hours") > 0)
    fig.add_trace(go.Bar(
        x=(cs["share"] * 100).to_list(), y=cs["cls"].to_list(), orientation="h",
        marker_color=[class_color(c) for c in cs["cls"]], showlegend=False,
        text=[f"{s:.0%}" for s in cs["share"]], textposition="auto",
        hovertemplate="%{y}: %{x:.1f}% of GPU-hours<extra></extra>"), row=1, col=1)
    if team_share.height:
        ts = team_share.head(10)
        fig.add_trace(go.Bar(
            x=(ts["share"] * 100).to_list(), y=ts["team"].to_list(), orientation="h",
            marker_color=[class_color(c) for c in ts["cls"]], showlegend=False,
            text=[f"{s:.0%}" for s in ts["share"]], textposition="auto",
            hovertemplate="%{y}: %{x:.1f}% of GPU-hours<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="% of pool GPU-hours", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return apply_theme(fig, height=height)
