"""Tail events: which p99 breaches happened, what caused each, and the evidence for a postmortem."""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics.charts.events import attribution_data, attribution_figure, event_figure, event_figure_data
from analytics.errors import TidelensError
from analytics.events import EventsConfig
from analytics.events.evidence import regression_rows
from analytics.events.wording import (HOLDER_COLUMNS, counterfactual_sentences, dashboard_vs_found, evidence_facts,
                                     events_headline, holder_rows, method_text, missing_event_words, top_event,
                                     regression_method, regression_sentence)
from analytics.fieldhelp import fields_help
from analytics.postmortem import report_html
from analytics.text import md, visible
from analytics.times import local_naive
from analytics.view import format_step
from pages._queries import EventsQuery
from pages._show import choose, kpi_row, made_download, show_chart, show_table
from pages._sidebar import keep_in_link, require_source, seed_from_link, view

_HELP = fields_help(EventsConfig)
EVENT_ROWS = 12  # the table's first events (a 25-row table of 7 columns adds ~0.3 s to a new tab)
EVENTS_INLINE = 5  # more events than this are a slider through them
_BADGE = {"batch_contention": "red", "traffic_surge": "blue", "scaling_lag": "orange", "mixed": "violet",
          "unexplained": "gray"}


st.title("Tail events")
v = view()
src = require_source()
if src is None:
    st.stop()
st.caption(f"{md(src.label)} · step {format_step(v.step_s)} · times in {v.tz} · p99 judged against the SLO, "
           f"never against its own daily profile")

# The answer first (how many, and the longest event), filled once the analysis below has run:
# the detection rule's panel, the KPIs and the table come after it.
headline = st.container(key="headline")
ss = st.session_state
seed_from_link("ev_min_dur", "ev_min", float, lambda x: 1.0 <= x <= 240.0, default=EventsQuery.min_duration_min)
seed_from_link("ev_gap", "ev_gap", float, lambda x: 0.0 <= x <= 240.0, default=EventsQuery.merge_gap_min)
for key in ("ev_min_dur", "ev_gap"):  # kept while their panel is folded (Streamlit drops undrawn widgets' values)
    ss[key] = ss[key]
incidents = ss.get("ev_incidents_file")  # (name, bytes) of the uploaded records, kept across folds
# The detection rule and the incident records are set in a panel drawn only when opened: its
# number inputs and file uploader cost a new tab ~0.4 s (bench/elements.py); its label says the rule.
rule = st.popover(f"Detection: runs of {ss['ev_min_dur']:g} min or more, gaps under {ss['ev_gap']:g} min "
                  "merged · " + (f"incident records {md(incidents[0])}" if incidents else "no incident records"),
                  icon=":material/rule:", key="ev_rule", on_change="rerun",
                  help="The rule that makes a tail event, and past postmortems to compare with")
if rule.open:
    c1, c2 = rule.columns(2)
    c1.number_input("Minimum duration (min)", min_value=1.0, max_value=240.0, step=1.0,
                    help=_HELP["min_duration_min"], key="ev_min_dur")
    c2.number_input("Merge gap (min)", min_value=0.0, max_value=240.0, step=1.0,
                    help=_HELP["merge_gap_min"], key="ev_gap")
    upload = rule.file_uploader("Incident records (CSV: start, end, service, recorded_cause)", type=["csv"],
                                key="ev_incidents", help="Past postmortems' causes, shown beside the cause found")
    if upload is not None:
        incidents = ss["ev_incidents_file"] = (upload.name, upload.getvalue())
    elif incidents and rule.button("Forget the incident records", key="ev_incidents_forget_go"):
        ss.pop("ev_incidents_file", None)
        st.rerun()  # the panel's label above still names them
min_dur, gap = float(ss["ev_min_dur"]), float(ss["ev_gap"])
keep_in_link("ev_min", min_dur, default=EventsQuery.min_duration_min)
keep_in_link("ev_gap", gap, default=EventsQuery.merge_gap_min)

try:
    query = EventsQuery.from_view(v, src, ss, incidents=incidents)
    analysis = query.run()
except TidelensError as exc:
    st.warning(md(exc), icon=":material/warning:")
    st.stop()
for note in analysis.notes:
    st.caption(f"Note: {md(note)}")

events = analysis.events
headline.markdown(md(events_headline(events, v.tz)))
if not events:
    st.success("No tail events in this range: every service's p99 stayed within its SLO "
               f"(runs shorter than {min_dur:g} min ignored).", icon=":material/check_circle:")
    st.stop()

starts = {e.id: local_naive(e.start_ms, v.tz) for e in events}  # in the page's zone, as the caption says
table = pl.DataFrame([{
    "start": starts[e.id], "service": e.service, "cause": e.cause_words,
    "minutes": round(e.duration_min), "peak p99 (ms)": round(e.peak_p99_ms), "SLO (ms)": e.slo_ms,
    "misattributed": e.misattributed, "recorded cause": (e.evidence.get("incident") or {}).get("recorded_cause"),
    "id": e.id} for e in events])
# The id is for the CSV and the link; a recorded cause only where incident records were given:
# a column fewer each, and the table fits a 1280x720 projector.
shown_columns = [c for c in table.columns if c != "id"
                 and (c != "recorded cause" or table[c].null_count() < table.height)]
k = kpi_row(4)
k[0].metric("Tail events", len(events), border=True)
k[1].metric("Batch contention", sum(e.cause == "batch_contention" for e in events), border=True)
k[2].metric("Traffic surges", sum(e.cause == "traffic_surge" for e in events), border=True)
k[3].metric("Misattributed", sum(e.misattributed for e in events), border=True,
            help="Batch contention that a dashboard (or the incident record) blames on users")
show_table(table, key="ev_table", rows=EVENT_ROWS, column_order=shown_columns, column_config={  # its download is a CSV
    "start": st.column_config.DatetimeColumn("start", format="YYYY-MM-DD HH:mm",
                                             help=f"In {v.tz}, as the page says above"),
    "peak p99 (ms)": st.column_config.NumberColumn(format="%,d"),
    "SLO (ms)": st.column_config.NumberColumn(format="%,g")})

# Each event as the table shows it.
labels = {e.id: f"{starts[e.id]:%Y-%m-%d %H:%M} · {e.service} · {e.cause_words}"
          + (" · misattributed" if e.misattributed else "") for e in events}
if "_seeded_ev_chosen" not in ss and st.query_params.get("event") not in (None, *labels):
    # A link's event these settings do not find (an id depends on the detection rule, the SLO and
    # the step): said, where it silently showed another event.
    st.warning(md(missing_event_words(st.query_params["event"])), icon=":material/link_off:")
# The event the headline names (the longest) is the one drawn first.
top = top_event(events)
seed_from_link("ev_chosen", "event", valid=labels.__contains__, default=top.id if top is not None else None)
# A few events are a list to pick from; dozens, a slider through them in time (a radio of 40 adds
# ~0.5 s to a new tab, a slider of options ~0.1-0.3 s: bench/elements.py). Its labels are plain text.
if len(labels) <= EVENTS_INLINE:
    chosen = choose("Event", labels, key="ev_chosen", format_func=labels.__getitem__, widget="radio",
                    horizontal=False)
else:
    if st.session_state.get("ev_chosen") not in labels:
        st.session_state["ev_chosen"] = top.id if top is not None else next(iter(labels))
    chosen = st.select_slider("Event", list(labels), format_func=lambda i: visible(labels[i]), key="ev_chosen",
                              help="The events in time, as the table lists them; arrow keys step one")
keep_in_link("event", chosen)  # always: a postmortem link names its event, whatever comes first later
ev = analysis.event(chosen)

st.subheader(f"{md(ev.service)}: {ev.duration_min:.0f} min, peak p99 {ev.peak_p99_ms:,.0f} ms")
# The badges, then the button at its label's width: in a quarter column it read "Postmortem rep...".
head = st.container(horizontal=True, vertical_alignment="center", gap="small")
head.badge(ev.cause_words, color=_BADGE.get(ev.cause, "gray"))
if ev.misattributed:
    head.badge("misattributed", color="red", icon=":material/report:")
with head:  # made in the run with its stage shown, then downloaded
    made_download("Postmortem report (HTML)", key="ev_report", what="Postmortem", inputs=(query, ev.id, v.tz),
                  make=lambda stage: report_html(analysis, ev, tz=v.tz, on_stage=stage),
                  file_name=f"tidelens-{ev.id}.html", mime="text/html",
                  help="One self-contained file: charts inline, opens offline")

said, happened = dashboard_vs_found(ev)
p1, p2 = st.columns(2)
with p1.container(border=True):
    st.markdown("**What the dashboard said**")
    st.text(said)
with p2.container(border=True):
    st.markdown("**What happened**")
    st.text(happened)

# One view at a time: a tab runs (and draws) only when it is picked.
timeline_tab, evidence_tab, method_tab = st.tabs(
    ["Timeline and attribution", "Evidence", "Method and thresholds"], key="ev_view",
    on_change="rerun")
if timeline_tab.open:
    with timeline_tab:
        show_chart(lambda: event_figure(analysis.event_window(ev), analysis.holdings_window(ev), ev, tz=v.tz),
                   lambda: event_figure_data(analysis.event_window(ev)), f"event-{ev.id}",
                   memo_key=(query, ev.id, v.tz))
        show_chart(lambda: attribution_figure(ev), lambda: attribution_data(ev), f"attribution-{ev.id}",
                   memo_key=(query, ev.id))
if evidence_tab.open:
    with evidence_tab:
        st.markdown("**Who held the pool's GPUs at the start, and since when**")
        show_table(pl.DataFrame(holder_rows(ev, v.tz), schema={c: pl.Utf8 for c in HOLDER_COLUMNS}),
                   key="ev_holders")
        st.markdown("**Evidence**")
        show_table(pl.DataFrame(evidence_facts(ev, v.tz), schema=["fact", "value"], orient="row"), key="ev_facts")
        st.markdown("**What p99 would have been at the peak**")
        st.markdown("\n".join(f"- {md(line)}" for line in counterfactual_sentences(ev)))
        reg = ev.evidence.get("regression") or {}
        if reg.get("coef"):
            st.markdown(md(regression_sentence(reg) or ""))
            fold = st.expander("Method: the regression", icon=":material/functions:", key="ev_method_reg",
                               on_change="rerun")
            if fold.open:
                fold.caption(md(regression_method(reg)))
                show_table(regression_rows(reg), key="ev_regression", where=fold)
if method_tab.open:
    with method_tab:
        for para in method_text(analysis.cfg, analysis):
            st.markdown(f"- {para}")
