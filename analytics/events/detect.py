"""Detection: runs of steps where a service's p99 is above its SLO.

Latency is judged against the SLO (or, for a service without one, against k times the latency
expected at the capacity the autoscaler *wanted*), never against latency's own seasonal profile:
a tail that recurs every morning is part of that profile, and a seasonal baseline would call it
normal. Nor against latency modelled at the capacity the service *got*: a pool starved by batch
makes the load per ready replica high, and such a model would "explain" the very tail we look for.

A step's ``ts`` is the end of the step ``(ts - step, ts]``, so a run of steps ``ts_a .. ts_b``
is the interval ``[ts_a - step, ts_b)``; runs whose gap is shorter than the merge gap become one
event, and events shorter than the minimum duration are dropped.
"""

from __future__ import annotations

import numpy as np

from analytics.times import step_start_ms


def detect_runs(ts_ms: np.ndarray, above: np.ndarray, *, step_ms: int, min_duration_ms: int,
                merge_gap_ms: int) -> list[tuple[int, int]]:
    """Intervals ``[start_ms, end_ms)`` where ``above`` holds, merged and filtered.

    Parameters
    ----------
    ts_ms:
        Step end times, ascending (gaps allowed: a missing step breaks a run).
    above:
        Boolean per step: the step breaches (missing values must already be ``False``).
    step_ms, min_duration_ms, merge_gap_ms:
        Step length, shortest event kept, and the gap below which two runs merge.

    Examples
    --------
    >>> ts = np.arange(1, 31) * 60_000
    >>> above = np.zeros(30, bool); above[4:10] = True; above[14:20] = True
    >>> detect_runs(ts, above, step_ms=60_000, min_duration_ms=300_000, merge_gap_ms=600_000)
    [(240000, 1200000)]
    """
    ts_ms = np.asarray(ts_ms, dtype=np.int64)
    above = np.asarray(above, dtype=bool)
    if ts_ms.size == 0 or not above.any():
        return []
    idx = np.flatnonzero(above)
    # A new run starts where the previous breaching step is not the adjacent step.
    breaks = np.flatnonzero(np.diff(ts_ms[idx]) != step_ms) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [idx.size]]) - 1
    runs = [(step_start_ms(int(ts_ms[idx[a]]), step_ms), int(ts_ms[idx[b]])) for a, b in zip(starts, ends)]
    merged: list[list[int]] = []
    for s, e in runs:
        if merged and s - merged[-1][1] < merge_gap_ms:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged if e - s >= min_duration_ms]
