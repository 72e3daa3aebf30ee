"""What a tail event means in words a meeting can quote: what a dashboard would have said beside
what happened, the evidence as labelled quantities with their units, the counterfactuals as
sentences, and the method's thresholds (behind the page's *Method* fold), for the Tail events
page, the postmortem (:mod:`analytics.postmortem`) and Grafana's annotations. Plain text: every
renderer escapes it. Times are in the zone the caller shows (the page's, the report's UTC).

The two cards agree: a rise the dashboard sees from the night's low is the daily ramp every day
has, so "what happened" measures the traffic against the norm for that hour, and says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analytics.events.analysis import EventsAnalysis
from analytics.events.config import EventsConfig
from analytics.events.event import Event
from analytics.events.evidence import format_p_value
from analytics.times import format_time, parse_time_ms
from analytics.units import MISSING, duration_text, gpus_text, minutes_text, rps_text, share_text
from analytics.units import ms_text as _ms


def ms_text(v: Any) -> str:
    """Milliseconds of p99 (:func:`analytics.units.ms_text`); ``n/a`` when missing."""
    return _ms(v)


def num_text(v: Any, nd: int = 1) -> str:
    return MISSING if v is None else f"{float(v):,.{nd}f}"


def time_text(iso: str | None, tz: str = "UTC") -> str:
    """An evidence time (ISO-8601 UTC, as the JSON keeps it) in zone ``tz``, with the zone.

    >>> time_text("2026-10-05T01:58:00Z", "Europe/Berlin"), time_text(None)
    ('2026-10-05 03:58 Europe/Berlin', 'n/a')
    """
    return MISSING if not iso else f"{format_time(parse_time_ms(iso), tz)} {tz}"


def _inside_band(e: dict[str, Any]) -> bool | None:
    rps, upper = e.get("traffic_rps_at_peak"), e.get("traffic_norm_upper_rps_at_peak")
    return None if rps is None or upper is None else rps <= upper


def traffic_vs_norm(e: dict[str, Any]) -> str:
    """The traffic at the peak against the norm for that hour, and whether that is the daily ramp.

    >>> traffic_vs_norm({"traffic_vs_norm_at_peak": 1.04, "traffic_rps_at_peak": 49.2,
    ...                  "traffic_norm_upper_rps_at_peak": 55.0})
    '1.04x the norm for that hour, inside its band: the daily ramp, not a surge'
    """
    ratio = e.get("traffic_vs_norm_at_peak")
    if ratio is None:
        return "of unknown size against its norm"
    words = f"{ratio:.2f}x the norm for that hour"
    inside = _inside_band(e)
    if inside is not None:
        words += (", inside its band: the daily ramp, not a surge" if inside
                  else f", above its band (up to {rps_text(e['traffic_norm_upper_rps_at_peak'])})")
    return words


def _dashboard_said(e: dict[str, Any]) -> str:
    """The dashboard's reading; a rise it reads as users, where the norm for the hour expects it,
    named as the daily ramp so the card beside it (measured against that norm) does not read as a
    contradiction."""
    naive = e.get("naive_reading") or {}
    rise = naive.get("traffic_rise_ratio")
    if naive.get("blames_users") and rise is not None:
        ramp = " (the daily ramp from its low)" if _inside_band(e) else ""
        said = (f"traffic rose {rise - 1:.0%} from its low in the {duration_text(naive.get('lookback_min', 120.0))} "
                f"before the tail{ramp}: read as user behaviour (a noisy tail)")
    else:
        said = naive.get("says", "")
    if e.get("incident"):
        said += f'; the incident record says "{e["incident"]["recorded_cause"]}"'
    return said


def dashboard_vs_found(ev: Event) -> tuple[str, str]:
    """``(what the dashboard said, what happened)`` in one sentence each."""
    e = ev.evidence
    naive = e.get("naive_reading") or {}
    said = _dashboard_said(e)
    cause = ev.cause
    if cause == "batch_contention":
        holders = [h for h in e.get("holders_at_start", []) if h["cls"] == "batch"]
        who = ", ".join(f'{h["workload"]} ({h["team"]}, {gpus_text(h["gpus"])} for '
                        f'{duration_text(h["hours_held"] * 60)})' for h in holders) or "batch work"
        wanted = ("The autoscaler wanted" if e.get("desired_replicas_source", "autoscaler") == "autoscaler"
                  else "Its traffic called for (no autoscaler signal: inferred)")
        happened = (f"batch held the pool's GPUs: {who}. {wanted} "
                    f"{num_text(e.get('desired_replicas_at_peak'), 0)} replicas and had "
                    f"{num_text(e.get('ready_replicas_at_peak'), 0)} ready; "
                    f"the pool had {_free_when_asked(e)} free when it asked. "
                    f"Traffic at the peak was {traffic_vs_norm(e)}.")
    elif cause == "traffic_surge":
        happened = (f"traffic at the peak was {traffic_vs_norm(e)} (above the band on "
                    f"{share_text(e.get('traffic_above_band_share') or 0)} of the steps): a genuine surge.")
    elif cause == "scaling_lag":
        happened = (f"traffic stayed within its norm and the pool had {_free_when_asked(e)} free "
                    f"when the autoscaler asked; replicas took ~{minutes_text(e.get('warmup_min'))} to warm up: "
                    f"an autoscaler tuning gap.")
    elif cause == "mixed":
        b, t = ev.shares.get("batch_contention", 0.0), ev.shares.get("traffic_surge", 0.0)
        cf = e.get("counterfactual_p99_ms_at_peak") or {}
        missed = (f"A dashboard blaming users would have missed the batch share ({b:.0%}): capacity for the surge "
                  f"alone would not have prevented it." if naive.get("blames_users") else
                  f"A dashboard would have missed both ({b + t:.0%} of the excess).")
        happened = (f"both causes at once: batch contention explains {b:.0%} of the excess latency and traffic "
                    f"above its norm ({traffic_vs_norm(e)} at the peak) {t:.0%}. "
                    f"At the peak, without batch p99 would have been about {ms_text(cf.get('actual_traffic_without_batch'))}; "
                    f"with normal traffic on the capacity it got, about {ms_text(cf.get('normal_traffic_actual_capacity'))} "
                    f"(observed {ms_text(e.get('p99_observed_ms_at_peak'))}). {missed}")
    else:
        happened = ("neither traffic nor batch explains most of it: the latency model explains "
                    f"{1 - ev.shares.get('unexplained', 1):.0%} of the excess.")
    return said, happened


def top_event(events: list[Event]) -> Event | None:
    """The event a meeting asks about first: the longest, then the higher peak p99."""
    return max(events, key=lambda e: (e.duration_min, e.peak_p99_ms), default=None)


def events_headline(events: list[Event], tz: str = "UTC") -> str:
    """The Tail events page's answer in one sentence: how many, of which causes, and the top
    event (:func:`top_event`) with its time in ``tz``, its length, peak and cause."""
    top = top_event(events)
    if top is None:
        return "No tail events in this range."
    batch = sum(e.cause == "batch_contention" for e in events)
    wrong = sum(e.misattributed for e in events)
    counts = (f"{len(events):,} tail event{'s' if len(events) != 1 else ''}: {batch:,} batch contention"
              + (f" ({wrong:,} a dashboard blames on users)" if wrong else ""))
    return (f"{counts}. The longest: {top.service} at {format_time(top.start_ms, tz)} ({tz}), "
            f"{duration_text(top.duration_min)} with p99 up to {ms_text(top.peak_p99_ms)}: {top.cause_words}"
            + (", misattributed" if top.misattributed else "") + ".")


def missing_event_words(event_id: str) -> str:
    """What a page says of a link's event that these settings do not find."""
    return (f"The link's event {event_id} is not among this range's events with these settings (an event's id "
            "depends on the range, the SLO, the step and the detection rule): showing the longest instead, the one "
            "the headline names.")


def _free_when_asked(e: dict[str, Any]) -> str:
    """``"0 of 64 GPUs"`` (the pool's size beside the free count), ``"0 GPUs"`` without it.

    >>> _free_when_asked({"free_gpus_when_asked": 0.143, "pool_gpus_at_start": 64.0})
    '0.1 of 64 GPUs'
    """
    free, pool = e.get("free_gpus_when_asked"), e.get("pool_gpus_at_start")
    if free is None:
        return "an unknown number of GPUs"
    return gpus_text(free) if pool is None else f"{gpus_text(free).split()[0]} of {gpus_text(pool)}"


def evidence_facts(ev: Event, tz: str = "UTC") -> list[tuple[str, str]]:
    """The evidence as a meeting reads it aloud: ``(label, quantity with its unit)``, times in ``tz``
    ("GPUs free when the autoscaler asked", "0 GPUs of 64"). The page's Evidence and the
    postmortem's table alike; the raw keys stay in the JSON."""
    e = ev.evidence
    cf = e.get("counterfactual_p99_ms_at_peak") or {}
    norm = (f"{rps_text(e.get('traffic_norm_rps_at_peak'))} expected, band up to "
            f"{rps_text(e.get('traffic_norm_upper_rps_at_peak'))}")
    facts = [
        ("GPUs free when the autoscaler asked", f"{_free_when_asked(e)}, at {time_text(e.get('asked_at'), tz)}"),
        ("Replicas wanted / ready at the start", f"{num_text(e.get('desired_replicas_at_start'), 0)} / "
                                                 f"{num_text(e.get('ready_replicas_at_start'), 0)}"),
        ("Replicas wanted / ready at the peak", f"{num_text(e.get('desired_replicas_at_peak'), 0)} / "
                                                f"{num_text(e.get('ready_replicas_at_peak'), 0)}"),
        ("Replicas it would have had without batch, at the peak", num_text(e.get("replicas_without_batch_at_peak"), 1)),
        ("Replicas wanted, from", str(e.get("desired_replicas_source") or "the autoscaler")),
        ("GPUs batch held at the start", gpus_text(e.get("batch_gpus_at_start"))),
        ("Batch held GPUs since", time_text(e.get("batch_held_since"), tz)),
        ("Warm-up of a new replica", f"{minutes_text(e.get('warmup_min'))} ({e.get('warmup_source') or 'n/a'})"),
        ("Autoscaler reaction", str(e.get("autoscaler_reaction") or MISSING)),
        ("Scale-up that capacity without batch waits for", minutes_text(e.get("scale_up_min_without_batch"))),
        ("Traffic at the peak", f"{rps_text(e.get('traffic_rps_at_peak'))}: {traffic_vs_norm(e)} ({norm})"),
        ("Steps above the norm band", share_text(e.get("traffic_above_band_share"))),
        ("Longest run above the band", minutes_text(e.get("traffic_surge_min"))),
        ("p99 at the peak: observed / explained by the load it carried",
         f"{ms_text(e.get('p99_observed_ms_at_peak'))} / {ms_text(e.get('p99_load_explained_ms_at_peak'))}"),
        ("p99 at the peak with normal traffic and no batch", ms_text(cf.get("normal_traffic_without_batch"))),
    ]
    if e.get("surge_check"):
        facts.append(("Its surge against the store's own surges without batch", e["surge_check"]["says"]))
    return facts


HOLDER_COLUMNS = ("team", "workload", "class", "GPUs", "held since", "held for")


def holder_rows(ev: Event, tz: str = "UTC") -> list[dict[str, str]]:
    """Who held the pool's GPUs at the event's start, and since when, in ``tz`` (columns
    :data:`HOLDER_COLUMNS`)."""
    return [dict(zip(HOLDER_COLUMNS, (h["team"], h["workload"], h["cls"], gpus_text(h["gpus"]),
                                      time_text(h["held_since"], tz), duration_text(h["hours_held"] * 60))))
            for h in ev.evidence.get("holders_at_start") or []]


def counterfactual_sentences(ev: Event) -> list[str]:
    """What p99 would have been at the peak, each counterfactual a sentence with its model term."""
    e = ev.evidence
    cf = e.get("counterfactual_p99_ms_at_peak") or {}
    return [
        f"Observed p99 {ms_text(e.get('p99_observed_ms_at_peak'))}; the load the replicas actually carried explains "
        f"{ms_text(e.get('p99_load_explained_ms_at_peak'))} (L(T, C)).",
        f"With this traffic but no batch holding GPUs, p99 would have been about "
        f"{ms_text(cf.get('actual_traffic_without_batch'))} (L(T, C0), {num_text(e.get('replicas_without_batch_at_peak'), 1)} "
        f"replicas instead of {num_text(e.get('ready_replicas_at_peak'), 0)}).",
        f"With normal traffic on the capacity it got: {ms_text(cf.get('normal_traffic_actual_capacity'))} (L(T0, C)).",
        f"With normal traffic and no batch: {ms_text(cf.get('normal_traffic_without_batch'))} (L(T0, C0)).",
        f"With this traffic on the replicas the autoscaler wanted: {ms_text(cf.get('actual_traffic_desired_replicas'))} "
        f"(L(T, desired)).",
    ]


def regression_sentence(reg: dict[str, Any]) -> str | None:
    """The regression's finding in one sentence: how much higher p99 ran, at the same traffic, for
    each tenth of the pool batch held (the model's terms are behind the *Method* fold).

    >>> regression_sentence({"n": 900, "coef": {"batch_share": {"estimate": 1.2, "ci95_low": 0.9,
    ...     "ci95_high": 1.5, "p_value": 1e-9}}})
    'Over the range, at the same traffic, p99 ran 13% higher for each tenth of the pool batch held (95% CI 9% to 16%; p < 0.001, 900 steps).'
    """
    term = (reg.get("coef") or {}).get("batch_share")
    if term is None:
        return None

    def pct(beta: float) -> str:
        return f"{np.expm1(0.1 * beta):.0%}"

    sign = "higher" if term["estimate"] >= 0 else "lower"
    p = format_p_value(term["p_value"])
    return (f"Over the range, at the same traffic, p99 ran {pct(abs(term['estimate']))} {sign} for each tenth of "
            f"the pool batch held (95% CI {pct(term['ci95_low'])} to {pct(term['ci95_high'])}; "
            f"p {p if p.startswith('<') else '= ' + p}, {reg['n']:,} steps).")


def regression_method(reg: dict[str, Any]) -> str:
    """The regression's model, errors and fit, for the *Method* fold beside its sentence.

    >>> regression_method({"model": "log p99_ms ~ const + log rps + batch_share (OLS)", "n": 900,
    ...                    "errors": "HAC / Newey-West, 14 lags", "r_squared": 0.61234})
    'Model: log p99_ms ~ const + log rps + batch_share (OLS) over 900 steps; standard errors HAC / Newey-West, 14 lags (robust to autocorrelation); R² 0.612. A batch_share coefficient whose interval excludes zero says latency rose with batch occupancy at a given traffic.'
    """
    return (f"Model: {reg['model']} over {reg['n']:,} steps; standard errors {reg['errors']} (robust to "
            f"autocorrelation); R² {reg['r_squared']:.3f}. A batch_share coefficient whose interval excludes zero "
            "says latency rose with batch occupancy at a given traffic.")


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
