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
- survives all three: ``scaling_lag`` (normal traffic on free GPUs; warm-up and HPA lag alone)

``misattributable_by_dashboard`` is true for a ``batch_contention`` event that starts on a
weekday within ``[ramp - 30 min, ramp + 2 h)``: it rises together with the normal morning ramp.
"""

from __future__ import annotations

import numpy as np


CAUSES = ("batch_contention", "traffic_surge", "mixed", "scaling_lag")
VARIANTS = ("no_batch", "no_surge", "neither")


def detect_runs(p99_ms: np.ndarray, slo_ms: float, min_len: int, merge_gap: int) -> list[tuple[int, int]]:
    """Minute ranges ``[a, b)`` of SLO breaches, merged across short gaps, long enough."""
    over = np.nan_to_num(p99_ms, nan=0.0) > slo_ms
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
    over_full = max(1, int((np.nan_to_num(full[a:b]) > slo_ms).sum()))
    info: dict[str, dict] = {}
    for v, p99 in variants.items():
        removed = not any(x < b and y > a for x, y in variant_runs[v])
        minutes = int((np.nan_to_num(p99[a:b]) > slo_ms).sum())
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
    else:
        cause = "scaling_lag"
    return cause, info
