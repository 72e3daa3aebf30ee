"""What a tail event means in words: what a dashboard would have said beside what happened, and
the method's thresholds, for the Tail events page, the postmortem (:mod:`analytics.postmortem`)
and Grafana's annotations. Plain text: every renderer escapes it."""

from __future__ import annotations

from typing import Any

from analytics.events.analysis import EventsAnalysis
from analytics.events.config import EventsConfig
from analytics.events.event import Event


def ms_text(v: Any) -> str:
    return "n/a" if v is None or v != v else f"{float(v):,.0f} ms"


def num_text(v: Any, nd: int = 1) -> str:
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
                    f"{num_text(e.get('desired_replicas_at_peak'), 0)} replicas and had "
                    f"{num_text(e.get('ready_replicas_at_peak'), 0)} ready; "
                    f"{num_text(e.get('free_gpus_when_asked'), 0)} GPUs were free when it asked. "
                    f"Traffic was {num_text(e.get('traffic_vs_norm_at_peak'), 2)}x its norm.")
    elif cause == "traffic_surge":
        happened = (f"traffic was {num_text(e.get('traffic_vs_norm_at_peak'), 2)}x its norm at the peak "
                    f"(above the norm band on {100 * (e.get('traffic_above_band_share') or 0):.0f}% of the steps): "
                    f"a genuine surge.")
    elif cause == "scaling_lag":
        happened = (f"traffic stayed within its norm and {num_text(e.get('free_gpus_when_asked'), 0)} GPUs were free "
                    f"when the autoscaler asked; replicas took ~{num_text(e.get('warmup_min'), 0)} min to warm up: "
                    f"an autoscaler tuning gap.")
    elif cause == "mixed":
        b, t = ev.shares.get("batch_contention", 0.0), ev.shares.get("traffic_surge", 0.0)
        cf = e.get("counterfactual_p99_ms_at_peak") or {}
        missed = (f"A dashboard blaming users would have missed the batch share ({b:.0%}): capacity for the surge "
                  f"alone would not have prevented it." if naive.get("blames_users") else
                  f"A dashboard would have missed both ({b + t:.0%} of the excess).")
        happened = (f"both causes at once: batch contention explains {b:.0%} of the excess latency and traffic "
                    f"above its norm ({num_text(e.get('traffic_vs_norm_at_peak'), 2)}x at the peak) {t:.0%}. "
                    f"At the peak, without batch p99 would have been about {ms_text(cf.get('actual_traffic_without_batch'))}; "
                    f"with normal traffic on the capacity it got, about {ms_text(cf.get('normal_traffic_actual_capacity'))} "
                    f"(observed {ms_text(e.get('p99_observed_ms_at_peak'))}). {missed}")
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
