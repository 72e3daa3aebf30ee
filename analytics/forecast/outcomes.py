"""The weighted outcomes a day's forecast replays: which runs hold GPUs, and when each ends.

A day's collisions depend on its own runs (a nightly run that may or may not start) and on the
runs already holding GPUs; the runs of other days in the horizon are held at what is most likely
(present when more likely than not, at their median end). A run that may start is present with
its probability and absent otherwise (two such runs of one day are enumerated, the rest held at
what is most likely); the runs present end together at one of the equally likely quantiles of
their lengths (a long night is long for each of them: the quantiles move together).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from analytics.forecast.runs_ahead import RunAhead

MAX_ENUMERATED = 2


@dataclass(frozen=True)
class Outcome:
    """One way the horizon's batch may go: ``weight`` (the outcomes of a day sum to 1) and the runs
    present, as (index into the runs, end in epoch ms)."""

    weight: float
    ends: tuple[tuple[int, int], ...]
    level: int  # which quantile of the lengths (-1: no run varies)


def day_outcomes(runs: list[RunAhead], day: int, k: int) -> tuple[list[Outcome], list[str]]:
    """The outcomes of ``day`` (epoch days), and notes on what was held fixed.

    >>> from analytics.forecast.runs_ahead import RunAhead
    >>> nightly = RunAhead("ft", "ml", 48, 0.8, 7_200_000, (36_000_000, 39_600_000), False, 0, "")
    >>> outs, _ = day_outcomes([nightly], 0, 2)
    >>> [(round(o.weight, 2), o.ends) for o in outs]
    [(0.2, ()), (0.4, ((0, 36000000),)), (0.4, ((0, 39600000),))]
    """
    notes: list[str] = []
    maybe = sorted((i for i, r in enumerate(runs) if r.day == day and not r.certain),
                   key=lambda i: -runs[i].probability)
    fixed_maybe = maybe[MAX_ENUMERATED:]
    if fixed_maybe:
        notes.append(f"{len(fixed_maybe)} more runs that may start that day are held at what is most likely")
    maybe = maybe[:MAX_ENUMERATED]
    varying = [i for i, r in enumerate(runs) if r.certain]
    steady = [(i, runs[i].ends_ms[len(runs[i].ends_ms) // 2]) for i, r in enumerate(runs)
              if not r.certain and i not in maybe and r.probability >= 0.5]
    out: list[Outcome] = []
    for present in product((False, True), repeat=len(maybe)):
        w = 1.0
        for i, here in zip(maybe, present):
            w *= runs[i].probability if here else 1.0 - runs[i].probability
        if w <= 0:
            continue
        moving = varying + [i for i, here in zip(maybe, present) if here]
        if not moving:
            out.append(Outcome(w, tuple(sorted(steady)), -1))
            continue
        for lvl in range(k):
            ends = [(i, _at_level(runs[i], lvl, k)) for i in moving] + steady
            out.append(Outcome(w / k, tuple(sorted(ends)), lvl))
    return out, notes


def _at_level(run: RunAhead, level: int, k: int) -> int:
    """The run's end at the ``level``-th of ``k`` equally likely quantiles (its own quantiles
    resampled when it has another number of them)."""
    n = len(run.ends_ms)
    return run.ends_ms[min(n - 1, int(level * n / k))]
