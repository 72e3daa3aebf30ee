"""Overview: the pool's story for the selected range at a glance."""

from __future__ import annotations

import streamlit as st

from analytics.charts.overview import pool_story_figure, share_figure
from analytics.errors import TidelensError
from analytics.measures import over_slo_label
from analytics.overview import (
    describe_class_rules,
    describe_signals,
    no_steps_message,
    pool_headline,
    pool_story_data,
    summarise,
    thin_for_display,
)
from analytics.text import escape_figure, md
from analytics.timeline import Timelines
from analytics.view import format_step
from pages._caches import cached_inventory, cached_signal_report, cached_timelines, cached_totals, memo
from pages._queries import review_html_for
from pages._show import kpi_row, made_download, show_chart, show_table
from pages._sidebar import page_setup, require_source
from pages._store import config_version

v = page_setup()
st.title("Overview")

src = require_source()
if src is None:
    st.stop()
# The caption takes the row, the button its label's width: in a fifth of a 1280x720 projector's
# row the label read "Capacity r...".
head = st.container(horizontal=True, vertical_alignment="center", gap="small")
head.caption(f"{md(src.label)} · step {format_step(v.step_s)} · times in {v.tz}")
with head:
    # Made in the run with its stage shown (10-24 s on a cold server), then downloaded.
    made_download("Capacity review (HTML)", key="ov_review", what="Capacity review",
                  inputs=(src.path, src.version, v.start_ms, v.end_ms, v.step_s, v.tz, config_version(),
                          v.slos.items()),
                  make=lambda stage: review_html_for(v, src, stage), file_name="tidelens-review.html",
                  mime="text/html", help="One self-contained file for the meeting: the pool, the rhythm, "
                                          "the tail events, the what-if and the bill for this range; opens offline")

try:
    timelines = cached_timelines(src.path, src.version, v.start_ms, v.end_ms, v.step_s,
                                 config_version())
except TidelensError as exc:
    st.warning(md(exc), icon=":material/warning:")
    timelines = None


def _story(tl: Timelines) -> tuple:
    """The KPIs' summary and the two charts, with their data (built once per view: pages._caches.memo)."""
    s = summarise(tl.pool, tl.holdings, tl.services, v.slos, v.step_s)
    if s.steps == 0:
        return s, None
    classes, violations = s.classes, s.violations
    drawn_classes, drawn_violations, k = thin_for_display(classes, violations, step_s=v.step_s)
    return s, (escape_figure(pool_story_figure(drawn_classes, drawn_violations, tz=v.tz)),
               pool_story_data(classes, violations), k,
               escape_figure(share_figure(s.class_share, s.team_share)), s.class_share.rename({"cls": "class"}))


if timelines is not None:
    s, charts = memo(("overview", src.path, src.version, v.start_ms, v.end_ms, v.step_s, config_version(),
                      v.slos.items(), v.tz), lambda: _story(timelines))
    # The answer first: the sentence and the chart, then the KPIs behind them (on a projector the
    # KPIs took the first screen and the chart began below it).
    if s.steps:
        st.container(key="headline").markdown(md(pool_headline(s)))
        story_fig, story_data, thinned, share_fig, share_data = charts
        show_chart(story_fig, story_data, "pool-story")
        if thinned > 1:
            st.caption(f"Drawn in {format_step(thinned * v.step_s)} buckets (GPUs averaged, p99 at its "
                       f"maximum); the KPIs and the CSV use every {format_step(v.step_s)} step.")
    k = kpi_row(5)
    k[0].metric("Pool size", f"{s.pool_gpus_max:,.0f} GPUs", border=True,
                help="Most GPUs in the pool(s) at any step of the range")
    k[1].metric("Mean allocation", "-" if s.allocation_pct is None else f"{s.allocation_pct:.0f}%",
                border=True, help="GPU-hours held by inference, batch or other workloads, "
                                  "as a share of the pool's GPU-hours")
    k[2].metric("Mean activity", "-" if s.activity_pct is None else f"{s.activity_pct:.0f}%",
                border=True, help="GPU activity (GR_ENGINE_ACTIVE or GPU_UTIL), GPU-weighted")
    k[3].metric(over_slo_label("any service", modelled=False), f"{s.slo_violation_min:,.0f}", border=True,
                help="Minutes of the range in which at least one service's p99 was above its own SLO "
                     "(a minute counts once), observed; each service's: "
                     + (", ".join(f"{md(n)} {m:,.0f}" for n, m in s.slo_violation_min_by_service.items())
                        or "no latency data"))
    held = s.gpu_hours_by_class
    k[4].metric("Pool GPU-hours", f"{s.gpu_hours:,.0f}", border=True,
                help="The pool's capacity: GPUs in the pool times hours over the range (held or not). "
                     "By class: " + ", ".join(f"{c} {h:,.0f}" for c, h in held.items() if c != "idle")
                     + f"; idle {held['idle']:,.0f}")
    if s.steps == 0:
        totals = cached_totals(src.path, src.version)
        st.info(md(no_steps_message(cached_signal_report(src.path, src.version),
                                    cached_inventory(src.path, src.version)[1]["metric"].to_list(),
                                    totals.get("first_ts_ms"), totals.get("last_ts_ms"), v.tz)),
                icon=":material/info:")
    else:
        st.caption(md(describe_class_rules(timelines.facts.class_rules)))  # read in the timeline pass
        show_chart(share_fig, share_data, "gpu-hour-shares")

report = cached_signal_report(src.path, src.version)
# The table is reference, not the story: folded, and drawn only when opened.
signals = st.expander(f"Signals in this store: {describe_signals(report)}",
                      icon=":material/sensors:", key="ov_signals", on_change="rerun")
if signals.open:
    show_table(report, where=signals, key="ov_signals_table")
