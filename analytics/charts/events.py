"""Tail-event figures: one shared-time-axis story of an event, and its attribution as a bar.

The story, top to bottom: traffic against its norm band; p99 against the SLO and against the
load-explained latency L(T, C) (and the counterfactual L(T0, C0)); GPUs held by class with the
batch admission marked; free GPUs; desired vs ready replicas (and the replicas it would have had
without batch).
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics.charts.theme import (OKABE_ITO, SLO_COLOR, apply_theme, class_color, display_ts,
                                    log_ms_axis, zone_label)
from analytics.events.event import Event
from analytics.text import escape_figure, plot_text
from analytics.timeline.config import CLASS_COLUMNS as WORKLOAD_CLASSES  # the order every chart stacks the classes in
from analytics.times import parse_time_ms

CAUSE_COLORS: dict[str, str] = {
    "batch_contention": OKABE_ITO["vermillion"], "traffic_surge": OKABE_ITO["blue"],
    "scaling_lag": OKABE_ITO["orange"], "mixed": OKABE_ITO["reddish_purple"], "unexplained": "#777777",
}
SHARE_LABELS: dict[str, str] = {"batch_contention": "batch contention", "traffic_surge": "traffic surge",
                                "unexplained": "unexplained"}
_CLASS_ORDER = WORKLOAD_CLASSES


def event_figure(window: pl.DataFrame, holdings: pl.DataFrame, ev: Event, *, tz: str = "UTC",
                 height: int = 1250) -> go.Figure:
    """The event's story on one time axis (see module docstring).

    Parameters
    ----------
    window:
        :meth:`analytics.events.EventsAnalysis.event_window` (``ts_ms, rps, t0, lower, upper,
        p99_ms, explained_ms, baseline_ms, gpus_idle, desired, ready, c0``).
    holdings:
        :meth:`~analytics.events.EventsAnalysis.holdings_window` (``ts_ms, cls, gpus``).
    ev:
        The event (its span is shaded on every row).
    """
    w = window.sort("ts_ms")
    x = display_ts(w["ts_ms"], tz)
    fig = make_subplots(rows=5, cols=1, shared_xaxes=True, vertical_spacing=ROW_GAP,
                        row_heights=[0.2, 0.26, 0.22, 0.12, 0.2], subplot_titles=ROW_TITLES)
    grey = "rgba(120,120,120,0.18)"
    fig.add_trace(go.Scatter(x=x, y=w["upper"], mode="lines", line=dict(width=0), showlegend=False,
                             hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["lower"], mode="lines", line=dict(width=0), fill="tonexty",
                             fillcolor=grey, name="norm band"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["expected"], mode="lines", name="norm (expected traffic)",
                             line=dict(color="#555555", dash="dot", width=2)), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["rps"], mode="lines", name="traffic T",
                             line=dict(color=OKABE_ITO["blue"], width=2.5)), row=1, col=1)
    fig.update_yaxes(title_text="req/s", rangemode="tozero", row=1, col=1)

    fig.add_trace(go.Scatter(x=x, y=w["p99_ms"], mode="lines", name="observed p99",
                             line=dict(color=OKABE_ITO["vermillion"], width=2.5)), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["explained_ms"], mode="lines", name="load-explained L(T, C)",
                             line=dict(color=OKABE_ITO["sky_blue"], width=2, dash="dash")), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["baseline_ms"], mode="lines", name="normal, no batch L(T0, C0)",
                             line=dict(color=OKABE_ITO["bluish_green"], width=2, dash="dot")), row=2, col=1)
    if ev.slo_ms == ev.slo_ms:  # not NaN
        # A trace, not add_hline: hline annotations land at 10^y on a log axis.
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[ev.slo_ms, ev.slo_ms], mode="lines",
                                 name=f"SLO {ev.slo_ms:g} ms", line=dict(color=SLO_COLOR, dash="dash", width=1.5)),
                      row=2, col=1)
    log_ms_axis(fig, [*w["p99_ms"].to_list(), *w["explained_ms"].to_list(), *w["baseline_ms"].to_list(),
                      ev.slo_ms], title="latency (log)", row=2, col=1)

    if holdings.height:
        by_cls = holdings.group_by("ts_ms", "cls").agg(pl.col("gpus").sum()).sort("ts_ms")
        for cls in _CLASS_ORDER:
            part = by_cls.filter(pl.col("cls") == cls)
            if part.height == 0:
                continue
            color = class_color(cls)
            fig.add_trace(go.Scatter(x=display_ts(part["ts_ms"], tz), y=part["gpus"], mode="lines",
                                     stackgroup="held", name=f"{cls} GPUs", line=dict(width=0.5, color=color),
                                     fillcolor=color), row=3, col=1)
    admitted = ev.evidence.get("batch_held_since")
    if admitted and w.height:
        at_ms = parse_time_ms(admitted, what="batch_held_since")
        at = display_ts(pl.Series([at_ms]), tz)[0]
        if at_ms >= int(w["ts_ms"][0]):
            fig.add_vline(x=at, line=dict(color=class_color("batch"), dash="dash", width=2), row=3, col=1)
            text, ax = "batch admitted", at
        else:  # admitted before the window: say when, at the window's left edge
            text, ax = f"batch holding since {at:%b %d %H:%M}", x[0]
        fig.add_annotation(x=ax, y=1, yref="y3 domain", text=text, showarrow=False, xanchor="left", yanchor="top",
                           bgcolor="rgba(255,255,255,0.85)", font=dict(color=class_color("batch")))
    fig.update_yaxes(title_text="GPUs", rangemode="tozero", row=3, col=1)

    fig.add_trace(go.Scatter(x=x, y=w["gpus_idle"], mode="lines", name="free GPUs",
                             line=dict(color="#777777", width=2, shape="hv")), row=4, col=1)
    fig.update_yaxes(title_text="GPUs", rangemode="tozero", row=4, col=1)

    fig.add_trace(go.Scatter(x=x, y=w["desired"], mode="lines", name="desired replicas",
                             line=dict(color=OKABE_ITO["black"], width=2, shape="hv", dash="dash")), row=5, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["ready"], mode="lines", name="ready replicas",
                             line=dict(color=OKABE_ITO["blue"], width=2.5, shape="hv")), row=5, col=1)
    fig.add_trace(go.Scatter(x=x, y=w["c0"], mode="lines", name="ready without batch (C0)",
                             line=dict(color=OKABE_ITO["bluish_green"], width=2, shape="hv", dash="dot")),
                  row=5, col=1)
    fig.update_yaxes(title_text="replicas", rangemode="tozero", row=5, col=1)

    span = display_ts(pl.Series([ev.start_ms, ev.end_ms]), tz)
    # One translucent band down the whole figure, over the stacked areas as add_vrect drew it
    # (the rows share their time axis): five add_vrect calls, one a row, took 0.18 s of a run.
    fig.add_shape(type="rect", xref="x", yref="paper", x0=span[0], x1=span[1], y0=0, y1=1,
                  fillcolor=CAUSE_COLORS.get(ev.cause, "#777777"), opacity=0.08, line_width=0)
    fig.update_xaxes(title_text=f"time ({zone_label(tz)})", row=5, col=1)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-0.12, yanchor="top", traceorder="normal",
                                  entrywidth=0.5, entrywidthmode="fraction"),
                      margin=dict(b=LEGEND_BOTTOM_PX))
    return escape_figure(apply_theme(fig, title=f"{plot_text(ev.service)}: {ev.cause_words} "
                                               f"(peak p99 {ev.peak_p99_ms:,.0f} ms)", height=height))


ROW_GAP = 0.06
# The legend below the time axis, in two columns (half the plot's width each: its longest entry
# fits a 1280x720 projector's half): beside the figure its entries took a third of the width
# from the plots. The margin below holds its seven rows and the time axis, so it never pushes.
LEGEND_BOTTOM_PX = 320
ROW_TITLES = ("Traffic vs its norm band", "p99 vs SLO and load-explained latency", "GPUs held, by class",
              "Free GPUs", "Replicas: desired vs ready")


def attribution_figure(ev: Event, *, height: int = 220) -> go.Figure:
    """The event's shares as one horizontal stacked bar adding to 100%."""
    fig = go.Figure()
    for key, label in SHARE_LABELS.items():
        v = float(ev.shares.get(key, 0.0))
        fig.add_trace(go.Bar(x=[v * 100], y=["share of excess p99"], orientation="h", name=label,
                             marker_color=CAUSE_COLORS[key], text=[f"{v:.0%}"], textposition="inside",
                             hovertemplate=f"{label}: %{{x:.1f}}%<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis=dict(range=[0, 100], title_text="% of the excess log-latency"),
                      yaxis=dict(showticklabels=False), legend_traceorder="normal",  # as the bar reads
                      margin=dict(l=20))  # no y labels to make room for
    return apply_theme(fig, title="Attribution (Shapley shares)", height=height)


def attribution_data(ev: Event) -> pl.DataFrame:
    """The numbers behind :func:`attribution_figure`, for CSV export: each cause's share."""
    return pl.DataFrame({"cause": list(SHARE_LABELS.values()),
                         "share": [float(ev.shares.get(k, 0.0)) for k in SHARE_LABELS]})


def event_figure_data(window: pl.DataFrame) -> pl.DataFrame:
    """The numbers behind :func:`event_figure`, for CSV export."""
    cols = [c for c in ("ts_ms", "service", "pool", "rps", "expected", "t0", "lower", "upper", "p99_ms", "explained_ms",
                        "baseline_ms", "gpus_batch", "gpus_idle", "desired", "ready", "c0") if c in window.columns]
    return window.select(cols).with_columns(pl.from_epoch("ts_ms", time_unit="ms").dt.replace_time_zone("UTC")
                                            .alias("ts")).drop("ts_ms")
