"""Forecast: before it happens, when each service will collide with the batch, how likely, how bad,
and the smallest change tonight that avoids it; beside it, the forecast scored on the store's past."""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics.errors import TidelensError
from analytics.forecast.drawn import horizon_figure
from analytics.forecast.report import (ACTION_HEADER, BACKTEST_HEADER, RUN_HEADER, WINDOW_HEADER, action_rows,
                                       backtest_rows, forecast_markdown, moment, range_text, run_rows,
                                       score_sentences, window_rows)
from analytics.text import escape_figure, md
from analytics.view import format_step
from pages._prefetch import background_allowed
from pages._queries import ForecastQuery, in_background, rerun_when_done
from pages._show import kpi_row, show_chart, show_table
from pages._sidebar import page_setup, require_source

v = page_setup()
st.title("Forecast")
src = require_source()
if src is None:
    st.stop()
st.caption(f"{md(src.label)} · step {format_step(v.step_s)} · times in {v.tz} · modelled: each night's "
           "outcomes replayed by the what-if")

query = ForecastQuery.from_view(v, src)
scored = ForecastQuery.from_view(v, src, backtest=True)
# the backtest beside the forecast: in the background, or on a click where the server computes
# nothing ahead of one (TIDELENS_PREFETCH=0)
job = in_background("forecast-backtest", scored, scored.run) if (
    background_allowed() or st.session_state.get("fc_score")) else None
try:
    answer = job.result() if job is not None and job.done() and job.exception() is None else query.run()
except TidelensError as exc:
    st.warning(md(exc), icon=":material/warning:")
    st.stop()
fc = answer.forecast
day = fc.next_day()
if day is None:
    st.info("The horizon holds no day to forecast.", icon=":material/info:")
    st.stop()
best = next((a for a in fc.actions if a.day == day.day and a.recommended), None)
with st.container(key="headline"):  # the answer first, above the chart and the tables
    k = kpi_row(4)
k[0].metric(f"Collision, {day.day}", f"{day.collision_probability:.0%}", border=True,
            help="The chance that a service's p99 goes over its SLO because batch holds the GPUs it needs "
                 "(the outcomes of the night replayed by the what-if, each with its weight)")
k[1].metric("Minutes over the SLO", f"{day.minutes_expected:,.0f}", border=True,
            help=f"Expected that day, every service: {range_text(day.minutes_range, day.calibrated)}")
k[2].metric("Services colliding", str(len(day.windows)), border=True,
            help=", ".join(md(w.service) for w in day.windows) or "none")
k[3].metric("Change tonight", best.kind if best else "none", border=True,
            help=md(best.text) if best else "No collision to avoid, or no change tried avoids it")
st.markdown(md(f"Made at {moment(fc.at_ms, v.tz)}, {fc.horizon_h:g} h ahead, under the {fc.policy} policy."))
st.markdown("\n".join(("  - " if line.startswith("  - ") else "- ") + md(line.lstrip(" -"))
                       for line in forecast_markdown(fc, v.tz).splitlines()))
show_chart(lambda: escape_figure(horizon_figure(fc, v.tz)), lambda: fc.traffic.join(fc.capacity, on="ts_ms", how="left"),
           "forecast-horizon", memo_key=(query, job is not None and job.done(), v.tz))
if fc.windows():
    show_table(pl.DataFrame(window_rows(fc, v.tz), schema=WINDOW_HEADER, orient="row"), key="fc_windows")
if fc.actions:
    st.subheader("The change tonight")
    show_table(pl.DataFrame(action_rows(fc), schema=ACTION_HEADER, orient="row"), key="fc_actions")
if fc.runs:
    show_table(pl.DataFrame(run_rows(fc, v.tz), schema=RUN_HEADER, orient="row"), key="fc_runs")
st.caption(md(f"Ranges: {fc.range_basis}. " + " ".join(fc.notes)))

st.subheader("Scored on its own past")
if answer.backtest is None:
    if job is None:
        st.button("Score it on this store's days", key="fc_score", icon=":material/fact_check:",
                  help="Forecast each day of the store as it would have been (18:00 the day before and 07:00) "
                       "and score it against what happened; the ranges are then calibrated 80% ranges")
    elif job.done() and job.exception() is not None:
        st.warning(md(f"The backtest could not run: {job.exception()}"), icon=":material/warning:")
    else:
        rerun_when_done(job, "Forecasting each day of the store as it would have been, and scoring it...")
else:
    for line in score_sentences(answer.backtest):
        st.markdown(md(line))
    if answer.backtest.rows:
        show_table(pl.DataFrame(backtest_rows(answer.backtest), schema=BACKTEST_HEADER, orient="row"),
                   key="fc_backtest")
