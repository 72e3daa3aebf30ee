"""The forecast drawn: the horizon's figure (the Forecast page's) and the capacity review's last
section, which carries it. Apart from :mod:`analytics.forecast.report`'s words and tables so that
``tidelens forecast``, which prints, never imports plotly."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from analytics.charts.forecast import forecast_figure
from analytics.document import Section
from analytics.forecast.horizon import Forecast
from analytics.forecast.outlook import ForecastAnswer
from analytics.forecast.report import (ACTION_HEADER, WINDOW_HEADER, action_rows, action_sentence, day_sentence,
                                       moment, score_sentences, window_rows)


def forecast_section(answer: ForecastAnswer, tz: str = "UTC") -> Section:
    """The capacity review's last section: tomorrow's collisions, the change that avoids them, the backtest."""
    fc = answer.forecast
    nxt = fc.next_day()
    if nxt is None:
        return Section("Forecast (modelled)", "No forecast: the horizon holds no day.")
    finding = day_sentence(nxt, tz, "Tomorrow" if nxt.start_ms - fc.at_ms >= 0 else "Today")
    paragraphs = [f"Made at the range's end ({moment(fc.at_ms, tz)}), {fc.horizon_h:g} hours ahead, "
                  f"under the {fc.policy} policy; each day's outcomes replayed by the what-if. Ranges: {fc.range_basis}."]
    act = action_sentence(fc, nxt, tz)
    if act:
        paragraphs.append(act)
    tables = []
    if fc.windows():
        tables.append((WINDOW_HEADER, window_rows(fc, tz)))
    if fc.actions:
        tables.append((ACTION_HEADER, action_rows(fc)))
    if answer.backtest is not None:
        paragraphs.extend(score_sentences(answer.backtest))
    return Section("Forecast (modelled)", finding, paragraphs=paragraphs, tables=tables,
                   figure=horizon_figure(fc, tz), figure_name="forecast-horizon")


def horizon_figure(fc: Forecast, tz: str = "UTC") -> go.Figure:
    """The horizon's figure (:func:`analytics.charts.forecast.forecast_figure`) for the forecast's first pool."""
    cap = fc.capacity.filter(pl.col("pool") == fc.capacity["pool"][0])
    windows = [{"service": w.service, "start_ms": w.start_ms, "end_ms": w.end_ms, "probability": w.probability}
               for w in fc.windows()]
    return forecast_figure(fc.traffic, cap, windows, tz=tz)
