"""The batch that will hold GPUs ahead: runs still running, recurring workloads' next runs, Kueue's queue.

Everything is read from the runs the what-if observes (:func:`analytics.whatif.observe.observe`:
contiguous holdings of each batch workload):

- a **recurring** workload has runs on two or more days, at most one a day (a nightly fine-tune);
  its next run is a chance, never a yes: the share of past days of the same day of the week it
  ran, shrunk towards the share of days of the same kind (weekday, weekend); it starts at its
  usual time and runs as long as its past runs did;
- a run **still running** at the moment of the forecast ends as its workload's past runs that
  lasted longer than it has so far say (at 07:00 a nightly run that has held the GPUs for five
  hours has only its long runs left to be);
- what does not recur (ad-hoc jobs) is expected to hold what it held at the same time of day on
  past days of the same kind (:func:`analytics.forecast.profile.profile_ahead`);
- Kueue's pending workloads, where the store has them: those waiting beyond the usual number at
  that time of day are added as runs of the usual ad-hoc size and length.

A run's end is a set of quantiles of its length (``levels``), each equally likely: the outcomes
the forecast replays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analytics.forecast.profile import DAY_MS, profile_ahead, weekend
from analytics.times import iso_utc
from analytics.whatif.observe import Observation

MIN_DAYS = 2  # runs on this many days make a workload recurring
SHRINK_DAYS = 14.0  # a day of the week's own share outweighs its kind's after this many weeks of it
# A recurring workload runs on most days of a kind it has run on: the share of those days it runs starts
# from Beta(4, 1) (a mean of 0.8, worth five days); a kind it never ran on from Jeffreys' Beta(1/2, 1/2).
# Chosen on the simulator's schedules of seeds 9-208 (bench/run_chance.py), never on the seeds
# bench/forecast.py scores: with a few weeks of history, a share from Jeffreys' prior swings with luck
# (the days after a first week or two with misses said 0.64 for a run that then ran 0.89 of the time).
RAN_KIND_PRIOR = (4.0, 1.0)
NEVER_RAN_PRIOR = (0.5, 0.5)
LARGE_SHARE = 0.1  # a run this share of the pool (or 8 GPUs) is forecast as itself, not in the mean
LARGE_GPUS = 8
LEAST_PROBABILITY = 0.01


@dataclass(frozen=True)
class PastRun:
    """One run the store saw: its first step's start, its last step's end, its GPUs."""

    workload: str
    team: str
    start_ms: int
    end_ms: int
    gpus: int
    running: bool  # still holding at the last step known
    censored_start: bool  # already holding at the first step known

    @property
    def length_min(self) -> float:
        return (self.end_ms - self.start_ms) / 60_000.0


@dataclass(frozen=True)
class RunAhead:
    """A run that may hold GPUs ahead: with ``probability`` it starts at ``start_ms`` and ends at
    one of ``ends_ms`` (equally likely quantiles of its length); ``running`` runs hold already."""

    workload: str
    team: str
    gpus: int
    probability: float
    start_ms: int
    ends_ms: tuple[int, ...]
    running: bool
    day: int  # the UTC day (epoch days) of its start
    basis: str

    @property
    def certain(self) -> bool:
        return self.probability >= 1.0 - 1e-9


@dataclass
class BatchOutlook:
    """The runs ahead, what the rest of batch is expected to hold, and Kueue's queue now."""

    runs: list[RunAhead]
    background_gpus: np.ndarray
    recurring: list[str]
    pending_now: float | None = None
    pending_usual: float | None = None
    notes: list[str] = field(default_factory=list)


def past_runs(obs: Observation) -> list[PastRun]:
    """The observation's batch runs with their times."""
    step_ms = obs.step_s * 1000
    out = []
    for r in obs.runs:
        out.append(PastRun(r.workload, r.team, int(obs.ts_ms[r.start]) - step_ms, int(obs.ts_ms[r.end - 1]),
                           int(r.gpus), running=r.end >= obs.steps, censored_start=r.start == 0))
    return out


def quantile_levels(k: int) -> np.ndarray:
    """The ``k`` equally likely quantile levels of a run's length.

    >>> quantile_levels(5).tolist()
    [0.1, 0.3, 0.5, 0.7, 0.9]
    """
    return (np.arange(k) + 0.5) / k


def _recurring(runs: list[PastRun]) -> bool:
    days = [r.start_ms // DAY_MS for r in runs if not r.censored_start]
    if len(set(days)) < MIN_DAYS:
        return False
    per_day = np.unique(days, return_counts=True)[1]
    return float(np.median(per_day)) <= 1.5


def run_probability(started_days: set[int], usual_ms: int, first_ms: int, last_ms: int, day: int
                    ) -> tuple[float, str]:
    """The chance a recurring workload runs on ``day``: the share of the past days of the same day of
    the week it ran, shrunk towards the share of the days of its kind (weekday or weekend) it ran, over
    the days whose usual start time the store saw (``first_ms`` to ``last_ms``). That share starts from
    :data:`RAN_KIND_PRIOR` on a kind the workload has run on, else :data:`NEVER_RAN_PRIOR`.

    >>> weekdays = {0, 1, 4, 5, 6, 7, 8, 11, 12, 13}  # two weeks from Thursday 1970-01-01
    >>> round(run_probability(weekdays, 7_200_000, 0, 14 * DAY_MS, 14)[0], 3)  # a Thursday
    0.942
    >>> round(run_probability(weekdays, 7_200_000, 0, 14 * DAY_MS, 16)[0], 3)  # a Saturday
    0.088
    >>> round(run_probability({0, 4, 5, 6}, 7_200_000, 0, 7 * DAY_MS, 7)[0], 2)  # ran 4 of its first 5 weekdays
    0.81
    """
    seen = [d for d in range(first_ms // DAY_MS - 1, last_ms // DAY_MS + 1)
            if first_ms <= d * DAY_MS + usual_ms <= last_ms]
    if not seen:
        return 0.0, "no day of the store saw its usual start"
    kind = bool(weekend(day * DAY_MS + 1)[0])
    same_kind = [d for d in seen if bool(weekend(d * DAY_MS + 1)[0]) == kind]
    same_dow = [d for d in same_kind if (d - day) % 7 == 0]
    k_kind = sum(d in started_days for d in same_kind)
    a, b = RAN_KIND_PRIOR if k_kind else NEVER_RAN_PRIOR
    p_kind = (k_kind + a) / (len(same_kind) + a + b)
    k_dow = sum(d in started_days for d in same_dow)
    p = (k_dow + SHRINK_DAYS * p_kind) / (len(same_dow) + SHRINK_DAYS)
    what = "weekend day" if kind else "weekday"
    dow = (f"ran on {k_dow} of {len(same_dow)} past days of the same day of the week and " if same_dow
           else "this day of the week not seen yet; ran on ")
    return float(p), f"{dow}{k_kind} of {len(same_kind)} {what}s"


def _quantiles(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    return np.quantile(np.asarray(x, float), levels)


def _hours(minutes: np.ndarray) -> str:
    return f"{np.min(minutes) / 60:.1f} to {np.max(minutes) / 60:.1f} h"


def batch_outlook(obs: Observation, ahead_ms: np.ndarray, levels: np.ndarray, *,
                  kueue: pl.DataFrame | None = None) -> BatchOutlook:
    """The batch ahead of the observation's last step, over the steps ``ahead_ms``.

    Parameters
    ----------
    obs:
        The history a forecast may know, as the what-if observes it (the pool of one service).
    ahead_ms:
        The step ends of the horizon.
    levels:
        Quantile levels of each run's length (:func:`quantile_levels`).
    kueue:
        ``ts_ms, pending`` of Kueue's pending workloads, when the store has them.
    """
    step_ms = obs.step_s * 1000
    at_ms, first_ms = int(obs.ts_ms[-1]), int(obs.ts_ms[0]) - step_ms
    end_ms = int(ahead_ms[-1]) if len(ahead_ms) else at_ms
    runs = past_runs(obs)
    by_name: dict[str, list[PastRun]] = {}
    for r in runs:
        by_name.setdefault(r.workload, []).append(r)
    recurring = sorted(n for n, rs in by_name.items() if _recurring(rs))
    large = max(LARGE_GPUS, LARGE_SHARE * float(np.max(obs.pool_gpus, initial=0.0)))
    done_once = np.array([r.length_min for r in runs if r.workload not in recurring and not r.running
                          and not r.censored_start], float)
    ahead: list[RunAhead] = []
    notes: list[str] = []
    background = np.zeros(obs.steps)
    for r in runs:
        if r.workload in recurring or (r.running and r.gpus >= large):
            continue
        a = int(np.searchsorted(obs.ts_ms, r.start_ms + step_ms))
        b = int(np.searchsorted(obs.ts_ms, r.end_ms)) + 1
        background[a:b] += r.gpus
    for r in runs:
        if not r.running:
            continue
        mine = by_name[r.workload]
        lengths = np.array([x.length_min for x in mine if not x.running and not x.censored_start], float)
        if r.workload not in recurring:
            if r.gpus < large:
                continue
            lengths = done_once
        elapsed = r.length_min
        longer = lengths[lengths > elapsed]
        if longer.size:
            rest = _quantiles(longer - elapsed, levels)
            why = (f"running since {iso_utc(r.start_ms)[11:16]} UTC for {elapsed / 60:.1f} h; {longer.size} of its "
                   f"{lengths.size} past runs lasted longer ({_hours(longer)})")
        else:
            rest = levels * 0.25 * elapsed
            why = (f"running since {iso_utc(r.start_ms)[11:16]} UTC for {elapsed / 60:.1f} h, longer than any of "
                   f"its {lengths.size} past runs: assumed to end within a quarter of that again")
        ahead.append(RunAhead(r.workload, r.team, r.gpus, 1.0, r.start_ms,
                              tuple(int(at_ms + m * 60_000) for m in rest), True, r.start_ms // DAY_MS, why))
    for name in recurring:
        mine = [x for x in by_name[name] if not x.censored_start]
        starts = np.array([x.start_ms for x in mine], np.int64)
        tods = starts % DAY_MS
        usual = int(np.median(tods))
        occurrence = {int(round((s - usual) / DAY_MS)) for s in starts}
        offsets = np.array([s - (int(round((s - usual) / DAY_MS)) * DAY_MS + usual) for s in starts], float)
        lengths = np.array([x.length_min for x in mine if not x.running], float)
        if lengths.size == 0:
            notes.append(f"{name}: no finished run yet, so no length to forecast its next run with")
            continue
        gpus = int(round(float(np.median([x.gpus for x in mine]))))
        for day in range(at_ms // DAY_MS - 1, end_ms // DAY_MS + 1):
            nominal = day * DAY_MS + usual
            if day in occurrence or nominal + offsets.max(initial=0.0) < at_ms - DAY_MS / 2:
                continue  # it ran (or runs) that day already, or that day is long past
            p, why = run_probability(occurrence, usual, first_ms, at_ms, day)
            late = offsets > (at_ms - nominal) / 1.0
            left = float(late.mean()) if at_ms > nominal + offsets.min(initial=0.0) else 1.0
            p_now = p * left / max(1e-9, 1.0 - p * (1.0 - left))
            if p_now < LEAST_PROBABILITY:
                continue
            start = int(max(at_ms + step_ms, nominal + (np.median(offsets[late]) if late.any() else 0.0)))
            if start >= end_ms:
                continue
            if left < 1.0:
                why += f"; not started by {iso_utc(at_ms)[11:16]} UTC, as {1 - left:.0%} of its runs had"
            ends = tuple(int(start + m * 60_000) for m in _quantiles(lengths, levels))
            ahead.append(RunAhead(name, mine[-1].team, gpus, float(min(1.0, p_now)), start, ends, False, day,
                                  f"{why}; usually starts {iso_utc(day * DAY_MS + usual)[11:16]} UTC on {gpus} GPUs "
                                  f"for {_hours(lengths)}"))
    out = BatchOutlook(ahead, profile_ahead(obs.ts_ms, background, ahead_ms), recurring, notes=notes)
    _kueue(out, kueue, at_ms, done_once, runs, large, ahead_ms, step_ms)
    out.runs.sort(key=lambda r: (r.start_ms, r.workload))
    return out


def _kueue(out: BatchOutlook, kueue: pl.DataFrame | None, at_ms: int, done_once: np.ndarray,
           runs: list[PastRun], large: float, ahead_ms: np.ndarray, step_ms: int) -> None:
    """Kueue's pending workloads now against the usual number at this time of day; those beyond it
    join the runs ahead as the usual ad-hoc run."""
    if kueue is None or kueue.height == 0:
        out.notes.append("no Kueue metrics in the store: workloads waiting in its queues are not known")
        return
    k = kueue.filter(pl.col("ts_ms") <= at_ms)
    if k.height == 0:
        return
    now = float(k["pending"][-1])
    tod = at_ms % DAY_MS
    same = k.filter(((pl.col("ts_ms") % DAY_MS) - tod).abs() <= step_ms)["pending"]
    usual = float(same.median()) if same.len() else 0.0
    out.pending_now, out.pending_usual = now, usual
    extra = int(round(max(0.0, now - usual)))
    if not extra:
        return
    small = [r.gpus for r in runs if r.gpus < large]
    gpus = int(round(float(np.median(small)))) if small else 1
    length = float(np.median(done_once)) if done_once.size else 60.0
    for i in range(extra):
        start = int(ahead_ms[0]) if len(ahead_ms) else at_ms + step_ms
        out.runs.append(RunAhead(f"kueue-pending-{i + 1}", "(queued)", gpus, 1.0, start,
                                 (int(start + length * 60_000),), False, start // DAY_MS,
                                 f"{now:g} workloads pending in Kueue, {usual:g} usual at this time of day: "
                                 f"one of the {extra} beyond it, at the usual ad-hoc size and length"))
