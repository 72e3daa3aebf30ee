"""The forecast's figure: the horizon ahead, traffic against the GPUs left to inference, collisions shaded."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics.charts.theme import CLASS_COLORS, OKABE_ITO, SERVICE_COLORS, apply_theme, display_ts, zone_label

WINDOW_COLOR = "rgba(213, 94, 0, 0.16)"  # vermillion, the batch class's colour, faint


def forecast_figure(traffic: pl.DataFrame, capacity: pl.DataFrame, windows: list[dict], *, tz: str = "UTC",
                    title: str = "The horizon ahead") -> go.Figure:
    """Two panels on the horizon: each service's traffic ahead with its 80% band, as a share of the
    band's top (top), and the pool's GPUs: held by others, held by batch on the most likely night (each
    run present when more likely than not, at its median end), and what the services need (bottom);
    each collision window shaded, with its service and chance.

    ``traffic``: ``ts_ms, service, expected, lower, upper``; ``capacity``: ``ts_ms, pool_gpus,
    others_gpus, batch_gpus, wanted_gpus`` (one pool); ``windows``: ``service, start_ms, end_ms,
    probability`` each.
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.5, 0.5])
    for i, (name,) in enumerate(traffic.select("service").unique(maintain_order=True).iter_rows()):
        part = traffic.filter(pl.col("service") == name).sort("ts_ms")
        x = display_ts(part["ts_ms"], tz)
        color = SERVICE_COLORS[i % len(SERVICE_COLORS)]
        # each service as a share of its band's top: services of 50 and 1,500 req/s on one axis
        peak = float(part["upper"].max() or 1.0) or 1.0
        fig.add_trace(go.Scatter(x=x, y=part["upper"] / peak, mode="lines", line=dict(width=0), showlegend=False,
                                 hoverinfo="skip", legendgroup=name), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=part["lower"] / peak, mode="lines", line=dict(width=0), fill="tonexty",
                                 fillcolor=_alpha(color, 0.2), showlegend=False, legendgroup=name,
                                 hoverinfo="skip"), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=part["expected"] / peak, mode="lines", line=dict(color=color, width=2),
                                 name=name, legendgroup=name, customdata=part["expected"],
                                 hovertemplate="%{customdata:,.3g} req/s (80% band shaded)"), row=1, col=1)
    cap = capacity.sort("ts_ms")
    x = display_ts(cap["ts_ms"], tz)
    fig.add_trace(go.Scatter(x=x, y=cap["others_gpus"], mode="lines", stackgroup="held", name="held by others",
                             line=dict(color=CLASS_COLORS["other"], width=0.5)), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=cap["batch_gpus"], mode="lines", stackgroup="held",
                             name="held by batch",
                             line=dict(color=CLASS_COLORS["batch"], width=0.5)), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=cap["others_gpus"] + cap["wanted_gpus"], mode="lines",
                             name="others + services' need", line=dict(color=CLASS_COLORS["inference"], width=2)),
                  row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=cap["pool_gpus"], mode="lines", name="pool",
                             line=dict(color=OKABE_ITO["black"], dash="dash")), row=2, col=1)
    for w in windows:
        a, b = display_ts(pl.Series([w["start_ms"], w["end_ms"]]), tz).to_list()
        fig.add_vrect(x0=a, x1=b, fillcolor=WINDOW_COLOR, line_width=0, layer="below")
        fig.add_annotation(x=a, y=1.0, yref="y domain", xanchor="left", yanchor="top", showarrow=False,
                           text=f"{w['service']} {w['probability']:.0%}", font=dict(size=13))
    fig.update_yaxes(title="traffic (share)", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title="GPUs", row=2, col=1, rangemode="tozero")
    fig.update_xaxes(title=f"time ({zone_label(tz)})", row=2, col=1)
    return apply_theme(fig, title=title, height=620)


def _alpha(hex_color: str, a: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r}, {g}, {b}, {a})"


def reliability_figure(rows: list[dict], title: str = "Days said to collide with about p, against how often they did"
                       ) -> go.Figure:
    """The backtest's reliability: each bin's probability said against the share of its days that
    collided (the diagonal is a forecast that means what it says); ``rows`` from
    :func:`analytics.forecast.skill.reliability` with a ``moment`` each."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="says what happens",
                             line=dict(color=OKABE_ITO["black"], dash="dash"), hoverinfo="skip"))
    for i, moment in enumerate(dict.fromkeys(r["moment"] for r in rows)):
        part = [r for r in rows if r["moment"] == moment]
        fig.add_trace(go.Scatter(x=[r["said"] for r in part], y=[r["collided"] for r in part], mode="markers+text",
                                 text=[f"{r['days']} d" for r in part], textposition="top center", name=moment,
                                 marker=dict(size=12, color=SERVICE_COLORS[i % len(SERVICE_COLORS)])))
    fig.update_xaxes(title="chance said", range=[-0.02, 1.02])
    fig.update_yaxes(title="share that collided", range=[-0.02, 1.08])
    return apply_theme(fig, title=title, height=420)
