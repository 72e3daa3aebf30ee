"""Data page figures: how much of each metric the store holds, and when each source covers."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from analytics.text import plot_text
from analytics.charts.theme import FONT_SIZE, OKABE_ITO, apply_theme, display_ts, zone_label


def inventory_figure(metrics: pl.DataFrame, *, top: int = 25, height: int | None = None) -> go.Figure:
    """Series per metric (bars, largest first) from ``Store.metrics()``."""
    m = metrics.sort(["series", "metric"], descending=[True, False]).head(top)
    fig = go.Figure(go.Bar(
        x=m["series"].to_list(), y=m["metric"].to_list(), orientation="h",
        marker_color=OKABE_ITO["blue"], customdata=m["samples"].to_list(),
        hovertemplate="%{y}<br>%{x} series, %{customdata:,} samples<extra></extra>"))
    fig.update_xaxes(title_text="series")
    # A metric's name is long (46 characters of vLLM's): smaller than the theme's, and the page
    # draws the chart its whole width (in a column of it the names ran off the figure).
    fig.update_yaxes(autorange="reversed", automargin=True, tickfont=dict(size=FONT_SIZE - 4))
    return apply_theme(fig, title="Series per metric",
                       height=height or max(300, 90 + 28 * max(m.height, 1)))


def coverage_figure(sources: pl.DataFrame, *, tz: str = "UTC", height: int | None = None) -> go.Figure:
    """Each loaded source's time span as a bar on a time axis, from ``Store.sources()``."""
    s = sources.filter((pl.col("status") == "loaded") & pl.col("first_ts").is_not_null())
    fig = go.Figure()
    if s.height:
        start = display_ts(s["first_ts"], tz)
        end = display_ts(s["last_ts"], tz)
        for name, a, b, n in zip(s["name"].to_list(), start.to_list(), end.to_list(),
                                 s["samples"].to_list()):
            # Each source's name above its bar, not beside the axis: a long name took the time
            # axis's width and its dates overprinted.
            fig.add_trace(go.Scatter(
                x=[a, b], y=[name, name], mode="lines+markers+text", showlegend=False,
                text=[name, ""], textposition="top right",  # escaped as every trace's (escape_figure)
                line=dict(width=12, color=OKABE_ITO["bluish_green"]),
                hovertemplate=f"{plot_text(name)}<br>%{{x}}<br>{n:,} samples<extra></extra>"))
    fig.update_xaxes(title_text=f"time ({zone_label(tz)})")
    fig.update_yaxes(showticklabels=False)
    return apply_theme(fig, title="Time covered by each source",
                       height=height or max(260, 120 + 40 * max(s.height, 1)))
