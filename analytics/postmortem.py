"""The postmortem report of one tail event: self-contained HTML, or Markdown with its figure beside it.

Both say, in plain words: what happened and what a dashboard would have said; the method and
its thresholds; the evidence (who held the GPUs and since when, free GPUs when the autoscaler
asked, desired vs ready replicas, traffic vs its norm, load-explained vs observed p99, the
regression with confidence intervals); and the counterfactuals. Every value that came from
labels (pod, workload, team, service names) is escaped, so a pod named ``<script>`` stays text.

The HTML embeds plotly.js (``include_plotlyjs=True``) and makes no external request; the
Markdown's figure is a PNG rendered by Kaleido (Debian's Chromium via ``BROWSER_PATH``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from analytics.charts.events import CAUSE_COLORS, attribution_figure, event_figure
from analytics.document import Document, Section, render_html, write_document
from analytics.events.analysis import EventsAnalysis
from analytics.events.event import Event, iso_utc
from analytics.events.evidence import regression_rows
from analytics.events.wording import (HOLDER_COLUMNS, counterfactual_sentences, dashboard_vs_found, evidence_facts,
                                     holder_rows, method_text, ms_text, regression_method, regression_sentence,
                                     time_text)


def report_sections(analysis: EventsAnalysis, ev: Event, tz: str = "UTC") -> list[Section]:
    """The report's content, renderer-neutral (plain text; renderers escape it); times in ``tz``."""
    e = ev.evidence
    said, happened = dashboard_vs_found(ev)
    secs = [Section("Summary", paragraphs=[
        f"Service {ev.service} (pool {ev.pool}) broke "
        + (f"its p99 SLO of {ms_text(e.get('slo_ms'))}" if e.get("slo_ms") is not None else
           f"{analysis.cfg.relative_k:g}x the p99 expected at the replicas the autoscaler wanted (it has no SLO)")
        + " from "
        f"{time_text(iso_utc(ev.start_ms), tz)} to {time_text(iso_utc(ev.end_ms), tz)} ({ev.duration_min:.0f} min); "
        f"p99 peaked at {ms_text(ev.peak_p99_ms)} at {time_text(e.get('peak_at'), tz)}.",
        f"Cause found: {ev.cause}. Shares of the excess latency: batch contention "
        f"{ev.shares.get('batch_contention', 0):.0%}, traffic surge {ev.shares.get('traffic_surge', 0):.0%}, "
        f"unexplained {ev.shares.get('unexplained', 0):.0%}."
        + (" Misattributed: a dashboard (or the incident record) blames users for what batch contention did."
           if ev.misattributed else ""),
    ])]
    secs.append(Section("What the dashboard said / what happened",
                        paragraphs=[f"The dashboard: {said}.", f"What happened: {happened}"]))
    inc = e.get("incident")
    if inc:
        secs.append(Section("Incident record", tables=[(["recorded cause", "read as", "found cause", "recorded window"],
                                                         [[inc["recorded_cause"], inc["as_cause"], ev.cause,
                                                           f"{inc['start']} .. {inc['end']}"]])]))
    secs.append(Section("Counterfactuals at the peak", paragraphs=counterfactual_sentences(ev)))
    holders = [list(h.values()) for h in holder_rows(ev, tz)]
    secs.append(Section("Evidence", paragraphs=["Who held the pool's GPUs at the event's start, and since when:"],
                        tables=[(list(HOLDER_COLUMNS), holders),
                                (["fact", "value"], [list(f) for f in evidence_facts(ev, tz)])]))
    reg = e.get("regression") or {}
    if reg.get("coef"):
        rows = [list(r.values()) for r in regression_rows(reg)]  # the page's numbers, the same way
        secs.append(Section("Regression over the analysed range", paragraphs=[
            *filter(None, [regression_sentence(reg)]),
            regression_method(reg)], tables=[(["term", "estimate", "95% CI", "p-value"], rows)]))
    secs.append(Section("Method and thresholds", paragraphs=method_text(analysis.cfg, analysis)))
    if analysis.notes:
        secs.append(Section("Notes", paragraphs=list(analysis.notes)))
    return secs


# -- rendering --------------------------------------------------------------------------------


def report_document(analysis: EventsAnalysis, ev: Event, *, tz: str = "UTC") -> Document:
    """The postmortem as the one renderer's document: the timeline figure (and, in HTML, the
    attribution bar) after the summary."""

    fig = event_figure(analysis.event_window(ev), analysis.holdings_window(ev), ev, tz=tz)
    sections = report_sections(analysis, ev, tz)
    sections.insert(1, Section("Timeline", figure=fig, figure_name="timeline", more_figures=[attribution_figure(ev)]))
    return Document(title=f"Tidelens postmortem: {ev.service} {ev.id}", heading=f"Postmortem: {ev.service} tail event",
                    heading_code=ev.id, badge=("Cause", ev.cause, CAUSE_COLORS.get(ev.cause, "#777")),
                    flag="misattributed" if ev.misattributed else None, sections=sections,
                    footer=f"Generated by Tidelens; times in {tz} unless marked; event id {ev.id}.")


def report_html(analysis: EventsAnalysis, ev: Event, *, tz: str = "UTC",
                on_stage: Callable[[str], None] = lambda _words: None) -> str:
    """One self-contained HTML page: plotly.js and both figures inline, no external request;
    ``on_stage`` hears its two stages (the page's status: seconds on a long event)."""
    on_stage("drawing the event's timeline")
    doc = report_document(analysis, ev, tz=tz)
    on_stage("writing the page")
    return render_html(doc)


def write_report(analysis: EventsAnalysis, ev: Event, path: str | Path, *, tz: str = "UTC") -> list[Path]:
    """Write the report to ``path`` (``.html``, or ``.md`` with its timeline as a PNG beside it);
    returns every file written.

    Raises
    ------
    ConfigError
        Any other extension.
    """
    return write_document(report_document(analysis, ev, tz=tz), path)
