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
from typing import Any

from analytics.document import Document, Section, render_html, write_document
from analytics.events.analysis import EventsAnalysis
from analytics.events.config import EventsConfig
from analytics.events.event import Event, iso_utc
from analytics.events.evidence import regression_rows


def _ms(v: Any) -> str:
    return "n/a" if v is None or v != v else f"{float(v):,.0f} ms"


def _num(v: Any, nd: int = 1) -> str:
    return "n/a" if v is None else f"{float(v):,.{nd}f}"


def dashboard_vs_found(ev: Event) -> tuple[str, str]:
    """``(what the dashboard said, what happened)`` in one sentence each."""
    e = ev.evidence
    naive = e.get("naive_reading") or {}
    said = naive.get("says", "")
    if e.get("incident"):
        said += f'; the incident record says "{e["incident"]["recorded_cause"]}"'
    cause = ev.cause
    if cause == "batch_contention":
        holders = [h for h in e.get("holders_at_start", []) if h["cls"] == "batch"]
        who = ", ".join(f'{h["workload"]} ({h["team"]}, {h["gpus"]:g} GPUs for {h["hours_held"]:.1f} h)'
                        for h in holders) or "batch work"
        wanted = ("The autoscaler wanted" if e.get("desired_replicas_source", "autoscaler") == "autoscaler"
                  else "Its traffic called for (no autoscaler signal: inferred)")
        happened = (f"batch held the pool's GPUs: {who}. {wanted} "
                    f"{_num(e.get('desired_replicas_at_peak'), 0)} replicas and had "
                    f"{_num(e.get('ready_replicas_at_peak'), 0)} ready; "
                    f"{_num(e.get('free_gpus_when_asked'), 0)} GPUs were free when it asked. "
                    f"Traffic was {_num(e.get('traffic_vs_norm_at_peak'), 2)}x its norm.")
    elif cause == "traffic_surge":
        happened = (f"traffic was {_num(e.get('traffic_vs_norm_at_peak'), 2)}x its norm at the peak "
                    f"(above the norm band on {100 * (e.get('traffic_above_band_share') or 0):.0f}% of the steps): "
                    f"a genuine surge.")
    elif cause == "scaling_lag":
        happened = (f"traffic stayed within its norm and {_num(e.get('free_gpus_when_asked'), 0)} GPUs were free "
                    f"when the autoscaler asked; replicas took ~{_num(e.get('warmup_min'), 0)} min to warm up: "
                    f"an autoscaler tuning gap.")
    elif cause == "mixed":
        b, t = ev.shares.get("batch_contention", 0.0), ev.shares.get("traffic_surge", 0.0)
        cf = e.get("counterfactual_p99_ms_at_peak") or {}
        missed = (f"A dashboard blaming users would have missed the batch share ({b:.0%}): capacity for the surge "
                  f"alone would not have prevented it." if naive.get("blames_users") else
                  f"A dashboard would have missed both ({b + t:.0%} of the excess).")
        happened = (f"both causes at once: batch contention explains {b:.0%} of the excess latency and traffic "
                    f"above its norm ({_num(e.get('traffic_vs_norm_at_peak'), 2)}x at the peak) {t:.0%}. "
                    f"At the peak, without batch p99 would have been about {_ms(cf.get('actual_traffic_without_batch'))}; "
                    f"with normal traffic on the capacity it got, about {_ms(cf.get('normal_traffic_actual_capacity'))} "
                    f"(observed {_ms(e.get('p99_observed_ms_at_peak'))}). {missed}")
    else:
        happened = ("neither traffic nor batch explains most of it: the latency model explains "
                    f"{1 - ev.shares.get('unexplained', 1):.0%} of the excess.")
    return said, happened


def method_text(cfg: EventsConfig, analysis: EventsAnalysis | None = None) -> list[str]:
    """The method and its thresholds in plain words."""
    warm = ""
    if analysis is not None and analysis.warmup_min:
        warm = " Warm-up measured from the data: " + ", ".join(
            f"{s} {m:g} min" for s, m in sorted(analysis.warmup_min.items())) + "."
    return [
        f"Detection: an event is a run of {cfg.step_s} s steps where the service's p99 is above its SLO for at least "
        f"{cfg.min_duration_min:g} minutes; runs separated by less than {cfg.merge_gap_min:g} minutes are merged. "
        f"Latency is never judged against its own seasonal profile (a tail that recurs every morning would look "
        f"normal). Services without an SLO use p99 above {cfg.relative_k:g}x the latency expected at the capacity "
        f"the autoscaler wanted.",
        "Latency model L(T, C): the median of log p99 against log load per ready replica, in quantile bins, made "
        "non-decreasing (isotonic), fitted only on uncontended steps (no batch GPUs in the pool, free GPUs "
        f"available); beyond the load seen there it rises at least {cfg.overload_slope_min:g}x as fast as the load "
        "(log-log), and model shortfall at such loads is given to the factors that created the overload.",
        "Normal traffic T0: the expected value of the traffic's norm band (daily and weekly rhythm, MSTL): a ramp "
        "that happens every day is normal; a surge is traffic above the band.",
        "Capacity without batch C0: the replicas the autoscaler wanted a scale-up earlier, bounded by ready replicas "
        "plus the GPUs batch held in the pool during that scale-up (idle GPUs cover the shortfall first; the rest is "
        "shared between services in proportion to their shortfall). The scale-up is the pool's own: the warm-up the "
        "store shows (desired to ready where free GPUs placed a scale-up at once, else scheduled to ready from the "
        "GPUs loading replicas held), plus the autoscaler's reaction where the desired replicas are inferred from "
        f"traffic ({cfg.reaction_min:g} min): freeing batch's GPUs does not make a new replica serve sooner, so a "
        "fast surge still queues while replicas load." + warm,
        "Shares: the excess log-latency L(T, C) - L(T0, C0) split by Shapley over traffic and batch "
        "(four evaluations of L), plus the model error (observed - L(T, C)) as 'unexplained'; each summed over "
        "the event, negative sums clipped to zero, normalised to add to 1.",
        f"Cause: 'scaling_lag' when neither the batch nor the traffic share is material (below {cfg.mixed_share:g}), "
        f"traffic stayed within its norm (under {cfg.surge_steps_share:.0%} of steps above the band), replicas were "
        f"short of what the autoscaler wanted, enough GPUs were free when it asked, and the missing replicas explain "
        f"the tail (the latency they add by the model, L(T, C) against L at the desired replicas, is at least what "
        f"the model cannot explain); else 'mixed' when batch and traffic shares are both material (at least "
        f"{cfg.mixed_share:g}, or {cfg.compound_share:g} where traffic stayed above its band {cfg.min_duration_min:g} "
        f"minutes in a row: a surge inside contention that outlasts it); else 'unexplained' when they add to less "
        f"than {cfg.explained_share:g}; else the larger of the two. A surge inside contention is checked against the "
        f"store's own surges of its size at its load without batch: whether they made a tail, and whether the "
        f"counterfactual without batch does (a note when they disagree).",
        f"Misattribution: a 'batch_contention' event that a dashboard would blame on users (traffic at the peak at "
        f"least {cfg.ramp_ratio:g}x its level in the {cfg.ramp_lookback_min:g} minutes before) or that an incident "
        f"record gave another cause. A 'mixed' event is not misattributed (users did add load); its story says the "
        f"share a dashboard would have missed.",
    ] + ([f"Workload map digest {analysis.map_digest}: the map that classed each GPU and pod for this "
          "analysis; tidelens audit names who set it and when."] if analysis is not None and analysis.map_digest else [])


def report_sections(analysis: EventsAnalysis, ev: Event) -> list[Section]:
    """The report's content, renderer-neutral (plain text; renderers escape it)."""
    e = ev.evidence
    said, happened = dashboard_vs_found(ev)
    secs = [Section("Summary", paragraphs=[
        f"Service {ev.service} (pool {ev.pool}) broke "
        + (f"its p99 SLO of {_ms(e.get('slo_ms'))}" if e.get("slo_ms") is not None else
           f"{analysis.cfg.relative_k:g}x the p99 expected at the replicas the autoscaler wanted (it has no SLO)")
        + " from "
        f"{iso_utc(ev.start_ms)} to {iso_utc(ev.end_ms)} ({ev.duration_min:.0f} min); p99 peaked at "
        f"{_ms(ev.peak_p99_ms)} at {e.get('peak_at')}.",
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
        f"Observed p99 {_ms(e.get('p99_observed_ms_at_peak'))}; the load the replicas actually carried explains "
        f"{_ms(e.get('p99_load_explained_ms_at_peak'))} (L(T, C)).",
        f"With this traffic but no batch holding GPUs, p99 would have been about "
        f"{_ms(cf.get('actual_traffic_without_batch'))} (L(T, C0), {_num(e.get('replicas_without_batch_at_peak'), 1)} "
        f"replicas instead of {_num(e.get('ready_replicas_at_peak'), 0)}).",
        f"With normal traffic on the capacity it got: {_ms(cf.get('normal_traffic_actual_capacity'))} (L(T0, C)).",
        f"With normal traffic and no batch: {_ms(cf.get('normal_traffic_without_batch'))} (L(T0, C0)).",
        f"With this traffic on the replicas the autoscaler wanted: {_ms(cf.get('actual_traffic_desired_replicas'))} "
        f"(L(T, desired)).",
    ]))
    facts = [
        ["traffic at the peak", f"{_num(e.get('traffic_rps_at_peak'), 2)} req/s"],
        ["its norm (expected / upper edge)", f"{_num(e.get('traffic_norm_rps_at_peak'), 2)} / "
                                              f"{_num(e.get('traffic_norm_upper_rps_at_peak'), 2)} req/s"],
        ["steps above the norm band", f"{100 * (e.get('traffic_above_band_share') or 0):.0f}%"],
        ["desired replicas from", str(e.get("desired_replicas_source") or "autoscaler")],
        ["desired / ready replicas at start", f"{_num(e.get('desired_replicas_at_start'), 0)} / "
                                               f"{_num(e.get('ready_replicas_at_start'), 0)}"],
        ["desired / ready replicas at the peak", f"{_num(e.get('desired_replicas_at_peak'), 0)} / "
                                                  f"{_num(e.get('ready_replicas_at_peak'), 0)}"],
        ["autoscaler asked at", str(e.get("asked_at") or "n/a")],
        ["free GPUs when it asked", _num(e.get("free_gpus_when_asked"), 1)],
        ["batch GPUs at start", _num(e.get("batch_gpus_at_start"), 1)],
        ["batch holding since", str(e.get("batch_held_since") or "n/a")],
        ["warm-up used", f"{_num(e.get('warmup_min'), 0)} min: {e.get('warmup_source') or 'n/a'}"],
        ["autoscaler reaction", str(e.get("autoscaler_reaction") or "n/a")],
        ["scale-up capacity without batch waits for", f"{_num(e.get('scale_up_min_without_batch'), 0)} min"],
        ["observed / load-explained p99 at the peak", f"{_ms(e.get('p99_observed_ms_at_peak'))} / "
                                                       f"{_ms(e.get('p99_load_explained_ms_at_peak'))}"],
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
    from analytics.charts.events import CAUSE_COLORS, attribution_figure, event_figure

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
