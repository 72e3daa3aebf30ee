"""The store's own surges, and a compound event's surge checked against what they did.

A **surge** is a run of a service's steps whose traffic stays above its norm band for at least
``min_duration_min`` (:func:`surge_runs`), described by its size (the upper quartile of traffic
over its norm's expected value: a run also holds the minutes it rises and falls through, and
those of a backlog given up on after it), its load (the median expected traffic under it), whether batch held GPUs
in the pool while it lasted, and what it did: the minutes over the SLO from its start to a
scale-up after its end (the replicas it asked for need that long to serve).

A surge inside batch contention is attributed through the latency model at the capacity the
pool would have had without batch (C0): that counterfactual says how many minutes over the SLO
the surge would have made alone. Where the store has surges of comparable size at comparable
load *without* batch, they did it for real. :func:`check_surge` compares the two; when they
disagree (the store's own surges made tails the counterfactual does not, or the reverse) the
event's traffic share is not to be trusted as it stands, and the evidence and the notes say so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from analytics.events.config import EventsConfig
from analytics.events.detect import detect_runs
from analytics.events.event import iso_utc
from analytics.measures import step_minutes

# Comparable: a size within 25% and a load within 30% of the event's surge (ratios).
SIZE_RATIO = 1.25
LOAD_RATIO = 1.3


def surge_runs(g: pl.DataFrame, over: np.ndarray, cfg: EventsConfig, tail_steps: int) -> list[dict[str, Any]]:
    """The surges of one service's steps ``g`` (sorted by time; ``ts_ms, rps, expected, upper,
    gpus_batch``), with ``over`` the steps over the SLO (the detection's own reading).

    Each surge: ``start_ms, end_ms`` (the steps above the band), ``factor`` (the upper quartile of
    traffic over expected), ``base_rps`` (median expected traffic), ``batch_gpus_max`` (in the pool while it
    lasted), ``minutes_over_slo`` (from its start to ``tail_steps`` after its end).

    >>> ts = np.arange(1, 61) * 60_000
    >>> rps = np.full(60, 10.0); rps[20:30] = 25.0
    >>> g = pl.DataFrame({"ts_ms": ts, "rps": rps, "expected": np.full(60, 10.0), "upper": np.full(60, 12.0),
    ...                   "gpus_batch": np.zeros(60)})
    >>> over = np.zeros(60, bool); over[21:33] = True
    >>> [(r["factor"], r["base_rps"], r["minutes_over_slo"]) for r in surge_runs(g, over, EventsConfig(), 5)]
    [(2.5, 10.0, 12.0)]
    """
    step_ms = cfg.step_s * 1000
    ts = g["ts_ms"].to_numpy()
    rps = g["rps"].fill_null(0.0).to_numpy().astype(float)
    expected = g["expected"].fill_null(np.nan).to_numpy().astype(float)
    upper = g["upper"].fill_null(np.inf).to_numpy().astype(float)
    batch = g["gpus_batch"].fill_null(0.0).to_numpy().astype(float)
    out = []
    for s, e in detect_runs(ts, rps > upper, step_ms=step_ms, min_duration_ms=int(cfg.min_duration_min * 60_000),
                            merge_gap_ms=0):
        sel = (ts > s) & (ts <= e)
        tail = (ts > s) & (ts <= e + tail_steps * step_ms)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = rps[sel] / expected[sel]
        ratio = ratio[np.isfinite(ratio)]
        if not ratio.size:
            continue
        out.append({"start_ms": int(s), "end_ms": int(e), "factor": round(float(np.quantile(ratio, 0.75)), 3),
                    "base_rps": round(float(np.nanmedian(expected[sel])), 3),
                    "batch_gpus_max": float(batch[sel].max()),
                    "minutes_over_slo": float(step_minutes(float(over[tail].sum()), step_s=cfg.step_s))})
    return out


def comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two surges of comparable size (within :data:`SIZE_RATIO`) at comparable load (:data:`LOAD_RATIO`)."""
    def within(x: float, y: float, r: float) -> bool:
        return x > 0 and y > 0 and max(x, y) / min(x, y) <= r
    return within(a["factor"], b["factor"], SIZE_RATIO) and within(a["base_rps"], b["base_rps"], LOAD_RATIO)


def check_surge(ev: pl.DataFrame, limit_ms: np.ndarray, runs: list[dict[str, Any]], start_ms: int, end_ms: int,
                traffic_share: float, cfg: EventsConfig, tail_steps: int) -> dict[str, Any] | None:
    """A compound event's surge against the store's surges of its size and load without batch.

    ``ev`` is the service's steps from the event's start to ``tail_steps`` after its end, with
    ``l_tc0`` (log L at the actual traffic and the capacity without batch); ``limit_ms`` the
    latency the detection judges each of those steps by (the SLO, or the relative rule's). The
    event's surge is the longest of ``runs`` inside it with batch in the pool; ``None`` when it
    has none. The counterfactual's minutes over the limit run from the surge's start to
    ``tail_steps`` after its end, as the store's surges' do.

    ``agrees`` says whether both tell the same about the surge alone: the store's comparable surges
    made a tail (a median of at least ``min_duration_min`` over the SLO) and so does the
    counterfactual, or neither does. A surge the store shows making tails alone, to which the
    counterfactual gives none, is the mistake this check exists for: a traffic share near zero
    for a morning the users doubled. ``says`` is the sentence a postmortem can cite.
    """
    own = [r for r in runs if r["batch_gpus_max"] > 0 and r["start_ms"] < end_ms and r["end_ms"] > start_ms]
    if not own:
        return None
    surge = max(own, key=lambda r: (r["end_ms"] - r["start_ms"], -r["start_ms"]))
    alone = [r for r in runs if r["batch_gpus_max"] <= 0 and comparable(r, surge)]
    ts = ev["ts_ms"].to_numpy()
    window = (ts > surge["start_ms"]) & (ts <= surge["end_ms"] + tail_steps * cfg.step_s * 1000)
    cf_ms = np.exp(ev["l_tc0"].fill_null(np.nan).to_numpy().astype(float))
    cf_minutes = float(step_minutes(float((np.nan_to_num(cf_ms, nan=0.0) > limit_ms)[window].sum()), step_s=cfg.step_s))
    out: dict[str, Any] = {
        "surge_start": iso_utc(surge["start_ms"]),
        "surge_min": round((surge["end_ms"] - surge["start_ms"]) / 60_000, 2), "surge_factor": surge["factor"],
        "surge_base_rps": surge["base_rps"], "minutes_over_slo_without_batch": cf_minutes,
        "comparable_surges_without_batch": [
            {"start": iso_utc(r["start_ms"]), "factor": r["factor"], "base_rps": r["base_rps"],
             "minutes_over_slo": r["minutes_over_slo"]} for r in alone]}
    size = f"{surge['factor']:.2g}x for {out['surge_min']:.0f} min"
    if not alone:
        out.update(agrees=None, says=f"the store has no surge like this one's ({size} at ~{surge['base_rps']:.3g} "
                                     f"req/s) without batch to check its traffic share against")
        return out
    theirs = float(np.median([r["minutes_over_slo"] for r in alone]))
    lo, hi = min(r["factor"] for r in alone), max(r["factor"] for r in alone)
    made = (f"the store's {len(alone)} surge(s) of {lo:.2g}-{hi:.2g}x at comparable load without batch made "
            f"{theirs:.0f} minutes over the SLO (median)")
    agrees = (theirs >= cfg.min_duration_min) == (cf_minutes >= cfg.min_duration_min)
    said = f"this event's surge ({size}) without batch would make {cf_minutes:.0f} by the latency model"
    if agrees:
        says = f"{made}; {said}: its traffic share ({traffic_share:.0%}) agrees with what such surges do alone"
    else:
        way = "low" if cf_minutes < theirs else "high"
        says = (f"{made}; {said}: its traffic share ({traffic_share:.0%}) is likely too {way} (check the "
                f"traffic, the warm-up and the latency model the attribution used)")
    out.update(agrees=agrees, says=says)
    return out
