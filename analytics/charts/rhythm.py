"""Rhythm figures: a signal's decomposition, hour-of-week heatmaps of traffic and batch side by
side, both daily profiles on one axis with the tidal window and the ramp collision marked, and
why a latency tail judged against its own seasonal profile disappears."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics.text import plot_text
from analytics.charts.theme import SLO_COLOR, apply_theme, class_color, display_ts, log_ms_axis, zone_label
from analytics.rhythm.decompose import Decomposition
from analytics.rhythm.summary import WEEKDAY_NAMES, RhythmSummary, self_norm_counts

TRAFFIC_COLOR = class_color("inference")
BATCH_COLOR = class_color("batch")
BAND_FILL = "rgba(0,114,178,0.15)"
TIDAL_FILL = "rgba(0,158,115,0.15)"
COLLISION_FILL = "rgba(213,94,0,0.22)"


def _hour_spans(start: int, end: int) -> list[tuple[int, int]]:
    """``[start, end)`` hours as one or two spans on a 0-24 axis (a window may cross midnight)."""
    return [(start, end)] if start < end else [(start, 24), (0, end)]


SMOOTH_POINTS = 1000


def _smooth_rows(n: int) -> pl.Series:
    """Row indices of every ``ceil(n / SMOOTH_POINTS)``-th step of ``n``, the last one included.

    >>> _smooth_rows(5).to_list(), len(_smooth_rows(4032)), _smooth_rows(4032)[-1]
    ([0, 1, 2, 3, 4], 808, 4031)
    """
    stride = max(1, -(-n // SMOOTH_POINTS))
    rows = list(range(0, n, stride))
    if n and rows[-1] != n - 1:
        rows.append(n - 1)
    return pl.Series(rows, dtype=pl.UInt32)


def decomposition_figure(dec: Decomposition, *, tz: str = "UTC", label: str | None = None,
                         height: int = 820) -> go.Figure:
    """Observed with its norm band, then trend, daily, weekly and residual, on one time axis.

    Drawn at the decomposition step (``dec.coarse``), the smooth lines at most
    ``SMOOTH_POINTS`` points each: 28 days stay a few thousand points.
    """
    rows = ["observed and norm band", "trend", "daily", *(["weekly"] if "weekly" in dec.periods_used else []),
            "residual"]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.03,
                        row_heights=[0.34] + [0.66 / (len(rows) - 1)] * (len(rows) - 1),
                        subplot_titles=rows)
    c = dec.coarse
    x = display_ts(c["ts"], tz)
    lower, upper = dec.coarse_band()
    # The smooth lines (band, expected, trend, seasonal components) at most SMOOTH_POINTS points
    # a line, its last kept: a plot is about that many pixels wide, and Plotly drew 28 days of
    # them at every step for nothing. Observed and residual keep every step: their spikes are
    # what a reader looks for. (Zoomed into a day, the smooth lines read at that stride: 28 days
    # at 10-minute steps keep a point every 50 minutes, beside the observed line's every step.)
    keep = _smooth_rows(c.height)
    xs = x.gather(keep)
    fig.add_trace(go.Scatter(x=xs, y=upper.gather(keep), mode="lines", line=dict(width=0),
                             showlegend=False, hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=lower.gather(keep), mode="lines", line=dict(width=0),
                             fill="tonexty", fillcolor=BAND_FILL, name="norm band", hoverinfo="skip"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=c["observed"], mode="lines", name="observed",
                             line=dict(color="#444444", width=1)), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=c["expected"].gather(keep), mode="lines", name="expected",
                             line=dict(color=TRAFFIC_COLOR, width=2)), row=1, col=1)
    for i, comp in enumerate(rows[1:], start=2):
        noisy = comp == "residual"
        fig.add_trace(go.Scatter(x=x if noisy else xs, y=c[comp] if noisy else c[comp].gather(keep),
                                 mode="lines", name=comp, showlegend=False,
                                 line=dict(color="#777777" if noisy else TRAFFIC_COLOR, width=1.5)),
                      row=i, col=1)
    filled = c.filter(pl.col("filled"))
    if filled.height:
        fig.add_trace(go.Scatter(x=display_ts(filled["ts"], tz), y=filled["expected"], mode="markers",
                                 name="no data (filled)", marker=dict(color="#BBBBBB", size=4)),
                      row=1, col=1)
    fig.update_xaxes(title_text=f"time ({zone_label(tz)})", row=len(rows), col=1)
    return _legend_below(apply_theme(fig, title=f"Rhythm of {plot_text(label or dec.value_col)}", height=height))


def _heatmap_matrix(how: pl.DataFrame) -> list[list[float | None]]:
    grid = {(int(w), int(h)): m for w, h, m in how.select("weekday", "hour", "mean").iter_rows()}
    return [[grid.get((w, h)) for h in range(24)] for w in range(1, 8)]


def hour_of_week_figure(traffic: pl.DataFrame, batch: pl.DataFrame | None, *, tz: str = "UTC",
                        traffic_label: str = "traffic (req/s)", batch_label: str = "batch GPUs",
                        height: int = 460) -> go.Figure:
    """Hour-of-week heatmaps, traffic and batch holdings side by side (``weekday, hour, mean``)."""
    cols = 2 if batch is not None and batch.height else 1
    fig = make_subplots(rows=1, cols=cols, horizontal_spacing=0.12,
                        subplot_titles=(traffic_label, batch_label)[:cols])
    hours = list(range(24))
    days = list(WEEKDAY_NAMES)
    fig.add_trace(go.Heatmap(z=_heatmap_matrix(traffic), x=hours, y=days, colorscale="Blues",
                             colorbar=dict(x=0.44 if cols == 2 else 1.0, len=0.9, title=""),
                             hovertemplate="%{y} %{x}:00 %{z:.1f}<extra>traffic</extra>"), row=1, col=1)
    if cols == 2:
        fig.add_trace(go.Heatmap(z=_heatmap_matrix(batch), x=hours, y=days, colorscale="Oranges",
                                 colorbar=dict(x=1.0, len=0.9, title=""),
                                 hovertemplate="%{y} %{x}:00 %{z:.1f}<extra>batch</extra>"), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=f"hour ({zone_label(tz)})", dtick=3)
    return apply_theme(fig, title="Hour of week", height=height)


def profiles_figure(summary: RhythmSummary, *, height: int = 480) -> go.Figure:
    """Traffic and batch daily profiles, each as a share of its own peak, on one hour axis.

    The tidal window (traffic below ``share`` of peak) is shaded green; the morning ramp is
    shaded orange where batch still holds GPUs when it starts (the collision).
    """
    fig = go.Figure()
    hours = [h + 0.5 for h in range(24)]  # a bar for the hour [h, h+1)
    prof = summary.profile
    peak = max((v for v in prof if v is not None), default=None)
    if peak:
        fig.add_trace(go.Scatter(x=hours, y=[None if v is None else v / peak for v in prof],
                                 mode="lines+markers", name=f"traffic ({summary.signal})",
                                 line=dict(color=TRAFFIC_COLOR, width=3)))
    b = summary.batch
    if b is not None and b.profile:
        bpeak = max((v for v in b.profile if v is not None), default=0) or None
        if bpeak:
            fig.add_trace(go.Scatter(x=hours, y=[None if v is None else v / bpeak for v in b.profile],
                                     mode="lines+markers", name="batch GPUs held",
                                     line=dict(color=BATCH_COLOR, width=3)))
    tw = summary.tidal_window
    if tw:
        for a, z in _hour_spans(tw["start_hour"], tw["end_hour"]):
            fig.add_vrect(x0=a, x1=z, fillcolor=TIDAL_FILL, line_width=0, layer="below")
        fig.add_annotation(x=0.01, xref="paper", y=0.99, yref="paper", xanchor="left",
                           text=f"tidal window {tw['start_hour']:02d}-{tw['end_hour']:02d} "
                                f"(traffic < {tw['share_of_peak']:.0%} of peak)", showarrow=False,
                           font=dict(color=class_color("other")), bgcolor="rgba(255,255,255,0.8)")
    if b is not None and b.ramp_window:
        rs, re_ = b.ramp_window["start_hour"], b.ramp_window["end_hour"]
        colliding = b.collision_days > 0
        for a, z in _hour_spans(rs, re_):
            fig.add_vrect(x0=a, x1=z, fillcolor=COLLISION_FILL if colliding else "rgba(0,0,0,0.05)",
                          line=dict(color=BATCH_COLOR if colliding else "#999999", dash="dot", width=1),
                          layer="below")
        text = (f"collision: batch still holding at ramp start on {b.collision_days}/{b.days} days, "
                f"{(b.ramp_overlap_share or 0):.0%} of ramp time" if colliding
                else "ramp: batch released before it")
        fig.add_annotation(x=0.01, xref="paper", y=0.91, yref="paper", xanchor="left", text=text,
                           showarrow=False, font=dict(color=BATCH_COLOR if colliding else "#555555"),
                           bgcolor="rgba(255,255,255,0.8)")
    fig.update_xaxes(title_text=f"hour of day ({zone_label(summary.timezone)})", range=[0, 24], dtick=2)
    fig.update_yaxes(title_text="share of own peak", range=[0, 1.25], tickformat=".0%")
    return _legend_below(apply_theme(fig, title="Daily profiles: traffic vs batch", height=height))


def one_day_figure(profile: pl.DataFrame, *, label: str, tz: str = "UTC", height: int = 420) -> go.Figure:
    """The hour-of-day means of a range too short for a rhythm (``hour, mean``), titled as what
    it is: one day is a shape, not yet a rhythm a capacity review can plan on."""
    name = plot_text(label)
    fig = go.Figure(go.Scatter(x=[h + 0.5 for h in profile["hour"].to_list()], y=profile["mean"].to_list(),
                               mode="lines+markers", name=name, line=dict(color=TRAFFIC_COLOR, width=3)))
    fig.update_xaxes(title_text=f"hour of day ({zone_label(tz)})", range=[0, 24], dtick=2)
    fig.update_yaxes(title_text=name, rangemode="tozero")
    return apply_theme(fig, title=f"Hour of day, {name}: one day, not a rhythm yet", height=height)


def _legend_below(fig: go.Figure) -> go.Figure:
    # The template's legend sits above the plot, where these charts put their annotations.
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
                      margin=dict(b=170))
    return fig


def self_norm_figure(p99: Decomposition, slo_ms: float, *, tz: str = "UTC", days: int = 3,
                     height: int = 480) -> go.Figure:
    """Why p99 must be judged against its SLO, not against its own seasonal profile.

    A tail that recurs every morning becomes part of p99's own daily component: it sits inside
    its own norm band (no anomaly), while it is plainly above the SLO.
    """
    f = p99.frame
    last = f["ts"].max()
    f = f.filter(pl.col("ts") > last - pl.duration(days=days)) if last is not None else f
    x = display_ts(f["ts"], tz)
    # Latency tails span orders of magnitude: a log axis, with the band's floor kept positive.
    floor = float(f["observed"].filter(f["observed"] > 0).min() or 1.0) / 2
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=f["upper"].clip(lower_bound=floor), mode="lines", line=dict(width=0),
                             showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=f["lower"].clip(lower_bound=floor), mode="lines", line=dict(width=0),
                             fill="tonexty",
                             fillcolor=BAND_FILL, name="p99's own seasonal norm band"))
    fig.add_trace(go.Scatter(x=x, y=f["observed"], mode="lines", name="p99 observed",
                             line=dict(color=TRAFFIC_COLOR, width=2)))
    # A trace, not add_hline: hline annotations land wrong on a log axis.
    fig.add_trace(go.Scatter(x=[x.min(), x.max()] if len(x) else [], y=[slo_ms, slo_ms], mode="lines",
                             name=f"SLO {slo_ms:g} ms", line=dict(color=SLO_COLOR, dash="dash", width=2)))
    n_above, n_inside = self_norm_counts(f, slo_ms)
    fig.add_annotation(xref="paper", yref="paper", x=0.01, y=0.99, showarrow=False, align="left",
                       xanchor="left", bgcolor="rgba(255,255,255,0.8)",
                       text=(f"{n_above} steps above the SLO;<br>{n_inside} of them inside p99's own "
                             f"seasonal band<br>(a seasonal baseline calls them normal)"))
    fig.update_xaxes(title_text=f"time ({zone_label(tz)})")
    log_ms_axis(fig, [*f["observed"].to_list(), *f["upper"].to_list(), slo_ms], title="p99 (log)")
    return _legend_below(apply_theme(fig, title="A daily tail hides inside its own seasonal profile",
                                     height=height))
