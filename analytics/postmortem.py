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

from pathlib import Path

from analytics.charts.events import CAUSE_COLORS, attribution_figure, event_figure
from analytics.document import Document, Section, render_html, write_document
from analytics.events.analysis import EventsAnalysis
from analytics.events.event import Event, iso_utc
from analytics.events.evidence import regression_rows
from analytics.events.wording import dashboard_vs_found, method_text, ms_text, num_text


def report_sections(analysis: EventsAnalysis, ev: Event) -> list[Section]:
    """The report's content, renderer-neutral (plain text; renderers escape it)."""
    e = ev.evidence
    said, happened = dashboard_vs_found(ev)
    secs = [Section("Summary", paragraphs=[
        f"Service {ev.service} (pool {ev.pool}) broke "
        + (f"its p99 SLO of {ms_text(e.get('slo_ms'))}" if e.get("slo_ms") is not None else
           f"{analysis.cfg.relative_k:g}x the p99 expected at the replicas the autoscaler wanted (it has no SLO)")
        + " from "
        f"{iso_utc(ev.start_ms)} to {iso_utc(ev.end_ms)} ({ev.duration_min:.0f} min); p99 peaked at "
        f"{ms_text(ev.peak_p99_ms)} at {e.get('peak_at')}.",
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
    cf = e.get("counterfactual_p99_ms_at_peak") or {}
    secs.append(Section("Counterfactuals at the peak", paragraphs=[
        f"Observed p99 {ms_text(e.get('p99_observed_ms_at_peak'))}; the load the replicas actually carried explains "
        f"{ms_text(e.get('p99_load_explained_ms_at_peak'))} (L(T, C)).",
        f"With this traffic but no batch holding GPUs, p99 would have been about "
        f"{ms_text(cf.get('actual_traffic_without_batch'))} (L(T, C0), {num_text(e.get('replicas_without_batch_at_peak'), 1)} "
        f"replicas instead of {num_text(e.get('ready_replicas_at_peak'), 0)}).",
        f"With normal traffic on the capacity it got: {ms_text(cf.get('normal_traffic_actual_capacity'))} (L(T0, C)).",
        f"With normal traffic and no batch: {ms_text(cf.get('normal_traffic_without_batch'))} (L(T0, C0)).",
        f"With this traffic on the replicas the autoscaler wanted: {ms_text(cf.get('actual_traffic_desired_replicas'))} "
        f"(L(T, desired)).",
    ]))
    facts = [
        ["traffic at the peak", f"{num_text(e.get('traffic_rps_at_peak'), 2)} req/s"],
        ["its norm (expected / upper edge)", f"{num_text(e.get('traffic_norm_rps_at_peak'), 2)} / "
                                              f"{num_text(e.get('traffic_norm_upper_rps_at_peak'), 2)} req/s"],
        ["steps above the norm band", f"{100 * (e.get('traffic_above_band_share') or 0):.0f}%"],
        ["desired replicas from", str(e.get("desired_replicas_source") or "autoscaler")],
        ["desired / ready replicas at start", f"{num_text(e.get('desired_replicas_at_start'), 0)} / "
                                               f"{num_text(e.get('ready_replicas_at_start'), 0)}"],
        ["desired / ready replicas at the peak", f"{num_text(e.get('desired_replicas_at_peak'), 0)} / "
                                                  f"{num_text(e.get('ready_replicas_at_peak'), 0)}"],
        ["autoscaler asked at", str(e.get("asked_at") or "n/a")],
        ["free GPUs when it asked", num_text(e.get("free_gpus_when_asked"), 1)],
        ["batch GPUs at start", num_text(e.get("batch_gpus_at_start"), 1)],
        ["batch holding since", str(e.get("batch_held_since") or "n/a")],
        ["warm-up used", f"{num_text(e.get('warmup_min'), 0)} min: {e.get('warmup_source') or 'n/a'}"],
        ["autoscaler reaction", str(e.get("autoscaler_reaction") or "n/a")],
        ["scale-up capacity without batch waits for", f"{num_text(e.get('scale_up_min_without_batch'), 0)} min"],
        ["observed / load-explained p99 at the peak", f"{ms_text(e.get('p99_observed_ms_at_peak'))} / "
                                                       f"{ms_text(e.get('p99_load_explained_ms_at_peak'))}"],
    ]
    check = e.get("surge_check")
    if check:
        facts.append(["its surge against the store's own surges without batch", check["says"]])
    holders = [[h["workload"], h["team"], h["cls"], f"{h['gpus']:g}", h["held_since"], f"{h['hours_held']:.2f}"]
               for h in e.get("holders_at_start", [])]
    secs.append(Section("Evidence", paragraphs=["Who held the pool's GPUs at the event's start, and since when:"],
                        tables=[(["workload", "team", "class", "GPUs", "held since (UTC)", "hours held"], holders),
                                (["fact", "value"], facts)]))
    reg = e.get("regression") or {}
    if reg.get("coef"):
        rows = [list(r.values()) for r in regression_rows(reg)]  # the page's numbers, the same way
        secs.append(Section("Regression over the analysed range", paragraphs=[
            f"{reg['model']}, {reg['n']} steps, {reg['errors']} (autocorrelation-robust), R² {reg['r_squared']:.3f}. "
            "A batch_share coefficient whose interval excludes zero says latency rose with batch occupancy at a "
            "given traffic."], tables=[(["term", "estimate", "95% CI", "p-value"], rows)]))
    secs.append(Section("Method and thresholds", paragraphs=method_text(analysis.cfg, analysis)))
    if analysis.notes:
        secs.append(Section("Notes", paragraphs=list(analysis.notes)))
    return secs


# -- rendering --------------------------------------------------------------------------------


def report_document(analysis: EventsAnalysis, ev: Event, *, tz: str = "UTC") -> Document:
    """The postmortem as the one renderer's document: the timeline figure (and, in HTML, the
    attribution bar) after the summary."""

    fig = event_figure(analysis.event_window(ev), analysis.holdings_window(ev), ev, tz=tz)
    sections = report_sections(analysis, ev)
    sections.insert(1, Section("Timeline", figure=fig, figure_name="timeline", more_figures=[attribution_figure(ev)]))
    return Document(title=f"Tidelens postmortem: {ev.service} {ev.id}", heading=f"Postmortem: {ev.service} tail event",
                    heading_code=ev.id, badge=("Cause", ev.cause, CAUSE_COLORS.get(ev.cause, "#777")),
                    flag="misattributed" if ev.misattributed else None, sections=sections,
                    footer=f"Generated by Tidelens; times in UTC unless marked; event id {ev.id}.")


def report_html(analysis: EventsAnalysis, ev: Event, *, tz: str = "UTC") -> str:
    """One self-contained HTML page: plotly.js and both figures inline, no external request."""
    return render_html(report_document(analysis, ev, tz=tz))


def write_report(analysis: EventsAnalysis, ev: Event, path: str | Path, *, tz: str = "UTC") -> list[Path]:
    """Write the report to ``path`` (``.html``, or ``.md`` with its timeline as a PNG beside it);
    returns every file written.

    Raises
    ------
    ConfigError
        Any other extension.
    """
    return write_document(report_document(analysis, ev, tz=tz), path)
