"""Rhythm: the daily and weekly rhythm of traffic and batch, the tidal window, and the collision."""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics.charts.rhythm import (
    decomposition_figure,
    hour_of_week_figure,
    one_day_figure,
    profiles_figure,
    self_norm_figure,
)
from analytics.errors import TidelensError
from analytics.rhythm import RhythmConfig, config_help
from analytics.rhythm.digest import ONE_DAY_NOTE
from analytics.rhythm.summary import rhythm_headline
from analytics.text import md
from analytics.units import hour_text, hour_window_text
from analytics.view import format_step
from pages._queries import RHYTHM_RESOLUTIONS_S, RhythmQuery
from pages._show import choose, kpi_row, show_chart
from pages._sidebar import keep_in_link, require_source, seed_from_link, view

HELP = config_help()


st.title("Rhythm")
v = view()
src = require_source()
if src is None:
    st.stop()
st.caption(f"{md(src.label)} · step {format_step(v.step_s)} · hours in {v.tz}")

# The answer first (when the signal peaks, when batch starts), then the signal's choice (drawn
# above the settings once the analysis says which there are): both filled after the analysis.
headline = st.container(key="headline")
signal_box = st.container()
c = st.columns([2, 1, 1])
seed_from_link("rhythm_resolution", "rh_res", int, RHYTHM_RESOLUTIONS_S.__contains__,
               default=RhythmConfig.resolution_s)
seed_from_link("rhythm_tidal", "rh_tidal", float, lambda x: 0.1 <= x <= 0.9, default=RhythmConfig.tidal_share)
seed_from_link("rhythm_band", "rh_band", float, lambda x: 0.80 <= x <= 0.995, default=RhythmConfig.band_high_q)
seed_from_link("rhythm_signal", "rh_signal")
resolution_s = choose("Decomposition step", RHYTHM_RESOLUTIONS_S, key="rhythm_resolution", where=c[0],
                      format_func=format_step, help=HELP["resolution_s"])
tidal_share = c[1].slider("Tidal share of peak", 0.1, 0.9, step=0.05, key="rhythm_tidal",
                          help=HELP["tidal_share"])
band_high_q = c[2].slider("Norm band upper quantile", 0.80, 0.995, step=0.005, key="rhythm_band",
                          help=HELP["band_high_q"])
keep_in_link("rh_res", int(resolution_s), default=RhythmConfig.resolution_s)
keep_in_link("rh_tidal", float(tidal_share), default=RhythmConfig.tidal_share)
keep_in_link("rh_band", float(band_high_q), default=RhythmConfig.band_high_q)
try:
    query = RhythmQuery.from_view(v, src, st.session_state)
    data = query.run()
except TidelensError as exc:
    st.warning(md(exc), icon=":material/warning:")
    st.stop()

if not data.signals or data.chosen is None:
    st.info("No traffic, batch or GPU signal in this store: load a service's metrics, a pool's "
            "dcgm-exporter data, or a CSV of a request-rate metric.", icon=":material/info:")
    st.stop()
names = [s.name for s in data.signals]
labels = {s.name: s.label for s in data.signals}
signal = choose("Signal", names, key="rhythm_signal", where=signal_box, widget="pills",
                default=data.chosen.signal.name, format_func=lambda n: f"{labels[n]}  ({n})",
                help="traffic per service, GPUs held by batch or inference per pool, activity, p99")
keep_in_link("rh_signal", signal, default=names[0])  # the analysis's own first choice

for note in data.assumption_notes:
    st.info(md(note), icon=":material/event_busy:")
chosen = data.chosen
if chosen.summary is None or chosen.decomposition is None:
    if chosen.profile is not None:  # under two days: the hours it has, said to be no rhythm
        headline.info(md(f"{ONE_DAY_NOTE.capitalize()}: {chosen.error}"), icon=":material/hourglass_empty:")
        show_chart(lambda: one_day_figure(chosen.profile, label=chosen.signal.label, tz=v.tz),
                   chosen.profile, "rhythm-hour-of-day", memo_key=(query, chosen.signal.name))
    else:
        headline.warning(md(chosen.error or "Not enough data for a rhythm."), icon=":material/hourglass_empty:")
    st.stop()
s = chosen.summary
headline.markdown(md(rhythm_headline(s, chosen.signal.label)))
tw = s.tidal_window
k = kpi_row(5)
k[0].metric(f"Peak hour ({s.timezone})", hour_text(s.peak_hour), border=True,
            help="Hour of day with the highest expected value (trend + daily + weekly, averaged)")
k[1].metric(f"Trough hour ({s.timezone})", hour_text(s.trough_hour), border=True)
k[2].metric("Trough / peak", "-" if s.trough_to_peak is None else f"{s.trough_to_peak:.0%}", border=True)
k[3].metric("Tidal window", "none" if tw is None else hour_window_text(tw["start_hour"], tw["end_hour"]),
            border=True, help=f"Hours [start, end) when the profile stays below {tidal_share:.0%} "
                              f"of its peak; may cross midnight")
k[4].metric("Weekend / weekday", "-" if s.weekend_to_weekday is None else f"{s.weekend_to_weekday:.0%}",
            border=True)
if s.batch is not None:
    b = s.batch
    kb = kpi_row(4)
    kb[0].metric(f"Batch typically starts ({s.timezone})", hour_text(b.typical_start_hour), border=True)
    kb[1].metric("Batch holds (median)", "-" if b.median_hold_h is None else f"{b.median_hold_h:.1f} h",
                 border=True)
    kb[2].metric("Ramp overlapped by batch", "-" if b.ramp_overlap_share is None
                 else f"{b.ramp_overlap_share:.0%}", border=True,
                 help="Share of the morning ramp's steps in which batch still held GPUs")
    kb[3].metric("Days batch held at ramp start", f"{b.collision_days} / {b.days}", border=True)
for note in s.notes:
    if note not in data.assumption_notes:
        st.caption(md(note))

dec = chosen.decomposition
views = ["Decomposition"]
if s.batch is not None or chosen.signal.kind == "traffic":
    views.append("Daily profile")
if data.traffic_how is not None:
    views.append("Hour of week")
views.append("p99 against its own rhythm")
# One view at a time: a tab runs (and its chart is drawn) only when it is picked.
tabs = dict(zip(views, st.tabs(views, key="rhythm_view", on_change="rerun")))
if tabs["Decomposition"].open:
    with tabs["Decomposition"]:
        show_chart(lambda: decomposition_figure(dec, tz=v.tz, label=chosen.signal.label),
                   lambda: dec.coarse.with_columns(*dec.coarse_band()), "rhythm-decomposition",
                   memo_key=(query, chosen.signal.name))
if "Daily profile" in tabs and tabs["Daily profile"].open:
    with tabs["Daily profile"]:
        prof = pl.DataFrame({"hour": list(range(24)), "traffic": s.profile,
                             "batch": s.batch.profile if s.batch is not None else [None] * 24})
        show_chart(lambda: profiles_figure(s), prof, "rhythm-profiles", memo_key=(query, chosen.signal.name))
if "Hour of week" in tabs and tabs["Hour of week"].open:
    with tabs["Hour of week"]:
        how = data.traffic_how.rename({"mean": "traffic"})
        if data.batch_how is not None:
            how = how.join(data.batch_how.rename({"mean": "batch_gpus"}), on=["weekday", "hour"],
                           how="full", coalesce=True)
        show_chart(lambda: hour_of_week_figure(data.traffic_how, data.batch_how, tz=v.tz),
                   how.sort("weekday", "hour"), "rhythm-hour-of-week", memo_key=query)
if tabs["p99 against its own rhythm"].open:
    with tabs["p99 against its own rhythm"]:
        st.subheader("Why p99 is judged against its SLO, not its own rhythm")
        if data.p99 is not None and data.p99.decomposition is not None:
            p99 = data.p99.decomposition
            service = data.p99.signal.entity
            slo = v.slos.ms(service)
            show_chart(lambda: self_norm_figure(p99, slo, tz=v.tz), p99.frame,
                       "rhythm-p99-self-norm", memo_key=(query, service, slo))
        else:
            st.caption("A tail that recurs every morning becomes part of p99's own daily component, "
                       "so a seasonal baseline calls it normal. This chart needs a service's p99 "
                       "over more than two days.")
