"""The look every Tidelens chart shares: class colours, a projector template, export settings.

One colour per workload class everywhere (Okabe-Ito, distinguishable with the common forms of
colour blindness): inference blue, batch vermillion, other bluish green, unknown reddish purple,
idle grey. Fonts are large because these charts are read off a projector across a room.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

# Before plotly: its validators read pandas from ``sys.modules`` without the import lock, so a
# figure built while another thread (the app's prefetch, a second session) is still importing
# pandas fails on the half-made module ("partially initialized module 'pandas' has no attribute
# 'Series'"). Importing it here makes every chart builder wait until pandas is whole.
import pandas  # noqa: F401
import plotly.graph_objects as go
import plotly.io as pio
import polars as pl

from analytics.timeline.config import CLASS_COLUMNS as WORKLOAD_CLASSES  # the order every chart stacks the classes in

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO: dict[str, str] = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
CLASS_COLORS: dict[str, str] = {
    "inference": OKABE_ITO["blue"],
    "batch": OKABE_ITO["vermillion"],
    "other": OKABE_ITO["bluish_green"],
    "unmanaged": OKABE_ITO["yellow"],
    "unknown": OKABE_ITO["reddish_purple"],
    "idle": "#BBBBBB",
}
assert tuple(CLASS_COLORS) == WORKLOAD_CLASSES
SLO_COLOR = OKABE_ITO["black"]
# Services are told apart by dash and by these, never by a class colour.
SERVICE_COLORS: tuple[str, ...] = (OKABE_ITO["sky_blue"], OKABE_ITO["orange"], OKABE_ITO["blue"],
                                   OKABE_ITO["reddish_purple"], OKABE_ITO["bluish_green"])

TEMPLATE_NAME = "tidelens"
FONT_SIZE = 18

# Streamlit's st.plotly_chart(config=...): the toolbar's camera button saves a 2x PNG.
PLOTLY_CONFIG: dict[str, object] = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2, "filename": "tidelens-chart"},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}

CHROMIUM = "/usr/bin/chromium"


TITLED_TOP_MARGIN_PX = 105  # a title's line, then one row of legend
# Margins that already hold what Plotly's automargin pushes them to for a y axis with a title
# and tick labels up to "1,000 ms" at FONT_SIZE, and for a time axis's two-line ticks below its
# title. A figure whose labels push a margin is laid out and drawn twice: 50-70 ms a chart in
# Chromium, on every page's first render (``bench/charts.py`` counts the pushed ones). Labels
# wider than these still push (nothing is cut), at that cost.
MARGIN_PX = {"l": 112, "r": 36, "t": 60, "b": 70}
TIME_AXIS_BOTTOM_PX = 95
TIME_AXIS_TICKS = 8


def _register_template() -> None:
    base = pio.templates["plotly_white"]
    template = go.layout.Template(base)
    template.layout.font = dict(size=FONT_SIZE, family="Inter, DejaVu Sans, Arial, sans-serif")
    template.layout.title = dict(font=dict(size=FONT_SIZE + 4))
    template.layout.legend = dict(font=dict(size=FONT_SIZE - 2), orientation="h",
                                  yanchor="bottom", y=1.02, x=0)
    template.layout.margin = dict(MARGIN_PX)
    template.layout.hoverlabel = dict(font=dict(size=FONT_SIZE - 2))
    template.layout.colorway = list(SERVICE_COLORS)
    pio.templates[TEMPLATE_NAME] = template


_register_template()


def class_color(cls: str) -> str:
    """The colour of a workload class (grey for a class the palette does not know)."""
    return CLASS_COLORS.get(cls, "#777777")


def apply_theme(fig: go.Figure, *, title: str | None = None, height: int | None = None) -> go.Figure:
    """Give a figure the Tidelens template (and optionally a title and height)."""
    # The registered template was validated when it was built: assign it unvalidated, as Plotly
    # assigns its own default template (``_initialize_layout_template``). Validating it again
    # took 15-37 ms a figure, every page run.
    layout = fig.layout
    was = layout._validate
    layout._validate = False
    try:
        layout.template = pio.templates[TEMPLATE_NAME]
    finally:
        layout._validate = was
    if title is not None:
        # The title above the legend (which sits just above the plot): neither covers the other.
        fig.update_layout(title=dict(text=title, y=1, yref="container", yanchor="top",
                                     pad=dict(t=10)))
        if fig.layout.margin.t is None:
            fig.update_layout(margin=dict(t=TITLED_TOP_MARGIN_PX))
    if height is not None:
        fig.update_layout(height=height)
    if _has_time_x(fig):
        # Level ticks, at most 8: Plotly turns every label of a crowded time axis on its side
        # (a projector then reads "10:30" upwards) and pushes the margin below to fit them.
        fig.update_xaxes(nticks=TIME_AXIS_TICKS, tickangle=0)
        if fig.layout.margin.b is None:
            fig.update_layout(margin=dict(b=TIME_AXIS_BOTTOM_PX))
    return fig


def _has_time_x(fig: go.Figure) -> bool:
    """Whether a trace draws on a time x axis (its two-line ticks need more room below)."""
    for trace in fig.data:
        x = getattr(trace, "x", None)
        if x is None or len(x) == 0:
            continue
        kind = getattr(getattr(x, "dtype", None), "kind", None)
        if kind == "M" or isinstance(x[0], (dt.datetime, dt.date)):
            return True
    return False


def format_ms(ms: float) -> str:
    """A latency tick as people say it: ``500 ms``, ``2 s``, ``0.5 ms``.

    >>> [format_ms(x) for x in (0.5, 20, 1000, 20000)]
    ['0.5 ms', '20 ms', '1 s', '20 s']
    """
    if ms >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms"


def log_ms_ticks(lo_ms: float, hi_ms: float) -> tuple[list[float], list[str]]:
    """Ticks 1-2-5 per decade from ``lo_ms`` to ``hi_ms``, labelled with units (Plotly's own log
    ticks read "2, 1000, 9, 8, 7" on a projector). Only decades when the span is wide.

    >>> log_ms_ticks(40, 900)[1]
    ['50 ms', '100 ms', '200 ms', '500 ms']
    >>> log_ms_ticks(1, 100_000)[1]
    ['1 ms', '10 ms', '100 ms', '1 s', '10 s', '100 s']
    """
    import math

    lo, hi = max(lo_ms, 1e-3), max(hi_ms, lo_ms * 1.0001, 1e-3)
    steps = (1.0,) if math.log10(hi / lo) > 3 else (1.0, 2.0, 5.0)
    vals = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for m in steps]
    vals = [v for v in vals if lo <= v <= hi] or [lo, hi]
    return vals, [format_ms(v) for v in vals]


def log_ms_axis(fig: go.Figure, values: "list[float] | pl.Series", *, title: str, **where: int) -> None:
    """Make a figure's y axis (``row``/``col`` in ``where``) a log axis of milliseconds with
    readable ticks over ``values`` (the p99s and SLOs it draws), so SLO lines never sit on zero."""
    import math

    finite = [float(v) for v in values if v is not None and v == v and v > 0 and math.isfinite(v)]
    if not finite:
        fig.update_yaxes(title_text=title, type="log", **where)
        return
    lo, hi = min(finite) / 1.3, max(finite) * 1.3
    vals, text = log_ms_ticks(lo, hi)
    fig.update_yaxes(title_text=title, type="log", tickvals=vals, ticktext=text,
                     range=[math.log10(lo), math.log10(hi)], **where)


def display_ts(ts: pl.Series, tz: str) -> pl.Series:
    """Step timestamps (epoch ms or datetimes, UTC) as datetimes in the display zone.

    The zone is dropped after conversion so Plotly shows wall-clock time without shifting it
    again in the browser.
    """
    if ts.dtype == pl.Datetime or isinstance(ts.dtype, pl.Datetime):
        dt = ts if ts.dtype.time_zone else ts.dt.replace_time_zone("UTC")  # type: ignore[union-attr]
    else:
        dt = pl.from_epoch(ts.cast(pl.Int64), time_unit="ms").dt.replace_time_zone("UTC")
    zone = "UTC" if tz in ("UTC", "") else str(ZoneInfo(tz))
    return dt.dt.convert_time_zone(zone).dt.replace_time_zone(None).alias(ts.name)


def zone_label(tz: str) -> str:
    return "UTC" if tz in ("UTC", "") else tz


def figure_image(fig: go.Figure, fmt: str = "svg", *, scale: float = 2.0) -> bytes:
    """Render a figure to PNG/SVG on the server with Kaleido, using Debian's Chromium.

    Kaleido drives a headless Chrome; where none is bundled it reads ``BROWSER_PATH``, which is
    pointed at ``/usr/bin/chromium`` when that exists and nothing else was chosen.
    """
    return _bounded(lambda: fig.to_image(format=fmt, scale=scale))


def figure_images(figs: list[go.Figure], paths: list[Path], fmt: str = "png", *, scale: float = 2.0) -> None:
    """Write each figure to its path as :func:`figure_image` renders it, in one Chromium: a
    report's charts cost one browser's start, not one each (five PNGs: 15 -> 2.6 s on the 2-core machine)."""
    if figs:
        _bounded(lambda: pio.write_images(figs, paths, format=fmt, scale=scale))


def _bounded(render: Callable[[], Any]) -> Any:
    """``render()`` with Chromium found, in a daemon thread, bounded by :data:`FIGURE_IMAGE_TIMEOUT_S`."""
    if "BROWSER_PATH" not in os.environ:
        found = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
        if found:
            os.environ["BROWSER_PATH"] = found
    # Kaleido times its render out (90 s) but not Chromium's start and close, which have been
    # seen to hang: a daemon thread and a bound, so a server request or a test never waits forever.
    import threading

    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(_caught(render)), name="tidelens-kaleido", daemon=True)
    worker.start()
    worker.join(FIGURE_IMAGE_TIMEOUT_S)
    if not done:
        raise RuntimeError(f"Chromium ({os.environ.get('BROWSER_PATH', 'kaleido')}) did not render the "
                           f"figure within {FIGURE_IMAGE_TIMEOUT_S:.0f} s; try again, or export the "
                           "chart's CSV instead")
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


FIGURE_IMAGE_TIMEOUT_S = 180.0


def _caught(render: Callable[[], Any]) -> Any:
    try:
        return render()
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread and raised there
        return exc


__all__ = ["CLASS_COLORS", "OKABE_ITO", "PLOTLY_CONFIG", "SERVICE_COLORS", "SLO_COLOR",
           "TEMPLATE_NAME", "apply_theme", "class_color", "display_ts", "figure_image", "figure_images",
           "zone_label"]
