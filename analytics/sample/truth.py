"""The ground truth of a simulated run: tail events and their causes, decided counterfactually.

**Events.** A tail event of a service is a run of minutes whose true p99 (the simulator's own,
from its per-request draws, :mod:`analytics.sample.latency`) is above the service's SLO; runs
separated by fewer than ``merge_gap_min`` minutes merge, and merged runs shorter than
``min_event_min`` minutes are dropped. Minute ``t`` is the step ending at ``ts_t = start + t *
scrape_s``; an event over minutes ``[a, b)`` has ``start = ts_a`` (inclusive) and ``end = ts_b``
(exclusive), i.e. the ``ts`` of its first step and the ``ts`` just after its last step.

**Causes.** The same seed is re-run without batch jobs (``no_batch``), without surges
(``no_surge``) and without either (``neither``); everything else, including every random draw,
is identical. An event is *removed* by a run when that run has no event overlapping it, and
*reduced* when that run has at most half the event's minutes above the SLO inside the event.

- removed by ``no_batch`` only: ``batch_contention`` (``mixed`` if ``no_surge`` reduces it)
- removed by ``no_surge`` only: ``traffic_surge`` (``mixed`` if ``no_batch`` reduces it)
- removed by both: ``mixed`` (each factor was necessary)
- removed by neither, but by ``neither``: ``mixed`` (either factor alone was enough)
- survives all three, removed by ``no_fault`` (the scenario's degraded replicas healthy,
  :mod:`analytics.sample.faults`; only scenarios with faults run it): ``unexplained`` (neither
  load nor capacity made it: no attribution by traffic and capacity can explain it)
- survives all three (and ``no_fault``): ``scaling_lag`` (normal traffic on free GPUs; warm-up and
  HPA lag alone)

**Shares.** Each event's factors are weighed the way the analysis weighs them (DESIGN.md, tail
events, step 5), on the simulator's own counterfactual p99 instead of a latency model: with
``v(run)`` the sum of log p99 over the event's minutes in that run,

- ``phi_batch = 1/2 [(v(full) - v(no_batch)) + (v(no_surge) - v(neither))]``
- ``phi_surge = 1/2 [(v(full) - v(no_surge)) + (v(no_batch) - v(neither))]``
- ``phi_fault = v(full) - v(no_fault)`` (faults fall at night, away from batch and surges)

each clipped at zero, normalised to shares adding to 1 under the analysis' keys
(``batch_contention``, ``traffic_surge``, ``unexplained``); all zero when no factor moved the
event's latency (scaling lag).

``misattributable_by_dashboard`` is true for a ``batch_contention`` event that starts on a
weekday within ``[ramp - 30 min, ramp + 2 h)``: it rises together with the normal morning ramp.
"""

from __future__ import annotations

import numpy as np

from analytics.measures import over_slo  # the truth counts minutes over the SLO as Tidelens does

CAUSES = ("batch_contention", "traffic_surge", "mixed", "scaling_lag", "unexplained")
VARIANTS = ("no_batch", "no_surge", "neither")  # every scenario; ``no_fault`` only with faults


def detect_runs(p99_ms: np.ndarray, slo_ms: float, min_len: int, merge_gap: int) -> list[tuple[int, int]]:
    """Minute ranges ``[a, b)`` of SLO breaches, merged across short gaps, long enough."""
    over = over_slo(p99_ms, slo_ms)
    if not over.any():
        return []
    edges = np.diff(np.concatenate([[0], over.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    merged: list[list[int]] = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        if merged and a - merged[-1][1] < merge_gap:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged if b - a >= min_len]




def classify(a: int, b: int, slo_ms: float, full: np.ndarray, variants: dict[str, np.ndarray],
             variant_runs: dict[str, list[tuple[int, int]]]) -> tuple[str, dict[str, dict]]:
    """The cause of the event over ``[a, b)`` by the rule in the module docstring."""
    over_full = max(1, int(over_slo(full[a:b], slo_ms).sum()))
    info: dict[str, dict] = {}
    for v, p99 in variants.items():
        removed = not any(x < b and y > a for x, y in variant_runs[v])
        minutes = int(over_slo(p99[a:b], slo_ms).sum())
        info[v] = {"removed": removed, "minutes_over_slo": minutes,
                   "reduced": minutes <= 0.5 * over_full,
                   "peak_p99_ms": round(float(np.nanmax(p99[a:b])), 1) if np.isfinite(p99[a:b]).any() else None}
    rb, rs = info["no_batch"]["removed"], info["no_surge"]["removed"]
    if rb and not rs:
        cause = "mixed" if info["no_surge"]["reduced"] else "batch_contention"
    elif rs and not rb:
        cause = "mixed" if info["no_batch"]["reduced"] else "traffic_surge"
    elif rb and rs:
        cause = "mixed"
    elif info["neither"]["removed"]:
        cause = "mixed"
    elif "no_fault" in info and info["no_fault"]["removed"]:
        cause = "unexplained"
    else:
        cause = "scaling_lag"
    return cause, info


def shares(a: int, b: int, full: np.ndarray, variants: dict[str, np.ndarray]) -> dict[str, float]:
    """The truth's shares of the event over ``[a, b)`` (module docstring), rounded to 4 places."""
    runs = {"full": full, **variants}
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = {k: np.log(np.asarray(v[a:b], float)) for k, v in runs.items()}
    ok = np.all([np.isfinite(x) for x in logs.values()], axis=0)
    v = {k: float(x[ok].sum()) for k, x in logs.items()}
    phi = {"batch_contention": 0.5 * ((v["full"] - v["no_batch"]) + (v["no_surge"] - v["neither"])),
           "traffic_surge": 0.5 * ((v["full"] - v["no_surge"]) + (v["no_batch"] - v["neither"])),
           "unexplained": v["full"] - v["no_fault"] if "no_fault" in v else 0.0}
    phi = {k: max(x, 0.0) for k, x in phi.items()}
    total = sum(phi.values())
    return {k: round(x / total, 4) if total > 0 else 0.0 for k, x in phi.items()}
