"""The smallest change tonight that avoids a forecast collision, and what it costs batch.

For each day with a likely collision (:data:`ACT_FROM` or more), the run that holds the GPUs in
it is changed in four ways, each as small as it can be and still avoid the collision on the
day's longest likely night (the outcome at the highest quantile of its length the forecast
replays), every one checked by the what-if on the same horizon, never by a model of its own:

- **earlier**: start it N hours earlier (a run that has not started yet);
- **hold**: hold it until the collision's window has passed (one that has not started), or pause
  it half an hour before the window and resume it after (one running: it pays the restore);
- **cap**: run it on K of its GPUs (its work takes longer on fewer);
- **reserve**: reserve R GPUs for each colliding service that batch never touches (the what-if's
  ``partitioned`` policy with that reservation and no soft-shared or spot classes).

Each is then replayed on all of the day's outcomes for the probability left, and costed on the
day's median night: the GPU-hours of the run's work done after it would have ended
(``delayed``), the work thrown away by interruptions (``lost``), and how its end moves. The
change recommended is the one that avoids the collision for the fewest of those GPU-hours.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from analytics.events.detect import detect_runs
from analytics.forecast.runs_ahead import RunAhead
from analytics.forecast.frames import DAY_MS
from analytics.forecast.horizon import DayForecast, Forecast
from analytics.forecast.model import RAISED, Context
from analytics.forecast.outcomes import Outcome, day_outcomes
from analytics.forecast.replay import HorizonReplays, held_mask, job_name, outcome_jobs
from analytics.times import iso_utc
from analytics.whatif.params import BatchJob
from analytics.whatif.outputs import PolicyResult

ACT_FROM = 0.2  # a day this likely to collide gets an action
LEFT_AT_MOST = 0.1  # an action avoids a collision when at most this chance of it is left
KINDS = ("earlier", "hold", "cap", "reserve")
EARLIER_STEP_H = 0.5
HOLD_STEP_H = 0.5
HOLD_MAX_H = 6.0
RESTORE_MIN = 5.0  # a paused run reloads its state (the what-if's default restore)
PAUSE_LEAD_H = 0.5  # a running run pauses this long before the window: the replicas warm up meanwhile

Change = Callable[[tuple[BatchJob, ...]], tuple[BatchJob, ...]]


@dataclass
class Action:
    """One way to avoid a day's collision (see the module)."""

    kind: str
    day: str
    workload: str
    text: str
    amount: float  # hours earlier, GPUs kept, hour it resumes (epoch ms), GPUs reserved
    avoids: bool
    probability_before: float
    probability_after: float
    gpu_hours_delayed: float
    gpu_hours_lost: float
    end_moves_h: float
    recommended: bool = False
    reserve_by_service: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "day": self.day, "workload": self.workload, "text": self.text,
                "avoids": self.avoids, "recommended": self.recommended,
                "probability_before": round(self.probability_before, 4),
                "probability_after": round(self.probability_after, 4),
                "gpu_hours_delayed": round(self.gpu_hours_delayed, 1), "gpu_hours_lost": round(self.gpu_hours_lost, 1),
                "end_moves_h": round(self.end_moves_h, 2), "reserve_by_service": self.reserve_by_service}


def _windows(ctx: Context, res: dict[str, PolicyResult]) -> dict[str, list[tuple[int, int]]]:
    """Each service's collision windows in its replay (against its replay without the runs)."""
    step_ms = ctx.step_s * 1000
    return {s: detect_runs(ctx.ahead_ms, (r.series["violation"] - ctx.services[s].counterfactual) > RAISED,
                           step_ms=step_ms, min_duration_ms=int(ctx.events.min_duration_min * 60_000),
                           merge_gap_ms=int(ctx.events.merge_gap_min * 60_000)) for s, r in res.items()}


def _collides(ctx: Context, res: dict[str, PolicyResult], span: tuple[int, int],
              before: dict[str, list[tuple[int, int]]]) -> bool:
    """Whether a service's replay still collides on the day (``span``), or collides where it did not
    before the change (a run moved earlier must not collide the evening before)."""
    for s, found in _windows(ctx, res).items():
        for a, b in found:
            if span[0] <= a < span[1]:
                return True
            if not any(a < e and x < b for x, e in before.get(s, [])):
                return True
    return False


def _replay(ctx: Context, pool: str, jobs: tuple[BatchJob, ...], held: np.ndarray,
            replays: dict[str, HorizonReplays] | None = None) -> dict[str, PolicyResult]:
    out = {}
    for s, sa in ctx.services.items():
        if sa.pool == pool:
            out[s] = (replays or {}).get(s, sa.replays).run(jobs, held)
    return out


def _shift(jobs: tuple[BatchJob, ...], name: str, **changes: Any) -> tuple[BatchJob, ...]:
    return tuple(replace(j, **changes) if j.name == name else j for j in jobs)


def actions_for(fc: Forecast) -> list[Action]:
    """The actions of each day of ``fc`` likely to collide (see the module); also set on ``fc``."""
    ctx: Context | None = fc.context
    out: list[Action] = []
    if ctx is None:
        return out
    for day in fc.days:
        if day.collision_probability < ACT_FROM or not day.windows:
            continue
        for pool in ctx.outlooks:
            if any(ctx.services[w.service].pool == pool for w in day.windows):
                out.extend(_day_actions(ctx, pool, day))
    fc.actions = out
    return out


def _responsible(ctx: Context, pool: str, day: DayForecast) -> int | None:
    """Index of the run that holds the GPUs in the day's windows: the day's own run named in them,
    else one running (the largest)."""
    named = {n for w in day.windows for n in w.runs}
    runs = ctx.runs(pool)
    d = int(day.start_ms // DAY_MS)
    for pick in (lambda r: r.day == d and not r.running, lambda r: r.running):
        cands = [i for i, r in enumerate(runs) if r.workload in named and pick(r)]
        if cands:
            return max(cands, key=lambda i: (runs[i].gpus, runs[i].probability))
    return None


def _day_actions(ctx: Context, pool: str, day: DayForecast) -> list[Action]:
    runs = ctx.runs(pool)
    i = _responsible(ctx, pool, day)
    if i is None:
        return []
    run = runs[i]
    d = int(day.start_ms // DAY_MS)
    outcomes, _ = day_outcomes(runs, d, ctx.levels)
    present = [o for o in outcomes if any(k == i for k, _ in o.ends)]
    if not present:
        return []
    worst = max(present, key=lambda o: dict(o.ends)[i])
    middle = sorted(present, key=lambda o: dict(o.ends)[i])[len(present) // 2]
    until = (int(day.start_ms), int(min(day.end_ms, (d + 1) * DAY_MS)))  # the day's part ahead
    name = job_name(run, i)
    made: list[Action] = []

    before: dict[Outcome, dict[str, list[tuple[int, int]]]] = {}

    def check(change: Change, outcome: Outcome, replays: dict[str, HorizonReplays] | None = None) -> bool:
        plain = outcome_jobs(runs, outcome, ctx.at_ms, ctx.step_s)
        if outcome not in before:
            before[outcome] = _windows(ctx, _replay(ctx, pool, plain, _held(plain, ctx)))
        jobs = change(plain)
        return _collides(ctx, _replay(ctx, pool, jobs, _held(jobs, ctx), replays), until, before[outcome])

    def finish(kind: str, text: str, amount: float, change: Change,
               replays: dict[str, HorizonReplays] | None = None, **extra: Any) -> None:
        # the nights with the run, longest first: once one clears, the shorter ones do too
        p_after = 0.0
        for o in sorted(present, key=lambda o: -dict(o.ends)[i]):
            if not check(change, o, replays):
                break
            p_after += o.weight
        p_after += sum(o.weight for o in outcomes if o not in present and check(_same, o, replays))
        made.append(Action(kind, day.day, run.workload, text, amount, p_after <= LEFT_AT_MOST,
                           day.collision_probability, float(p_after),
                           *_cost(ctx, pool, runs, middle, name, change, replays), **extra))

    job = outcome_jobs(runs, worst, ctx.at_ms, ctx.step_s)
    mine = next(j for j in job if j.name == name)
    start_ms = mine.arrival_ms - ctx.step_s * 1000
    if not run.running:
        # earlier: the fewest half hours that clear the longest night (doubling, then halving back: an
        # earlier start clears more of the morning, until it meets the evening before)
        most = int((start_ms - ctx.at_ms) / 3_600_000 / EARLIER_STEP_H)
        k = _least(lambda k: not check(_move(name, -k * EARLIER_STEP_H), worst), most)
        if k is not None:
            finish("earlier", f"start {run.workload} {k * EARLIER_STEP_H:g} h earlier, at "
                   f"{iso_utc(start_ms - int(k * EARLIER_STEP_H * 3_600_000))[11:16]} UTC", k * EARLIER_STEP_H,
                   _move(name, -k * EARLIER_STEP_H))
    # hold: until the latest end of the day's windows, then half hours more while it still collides
    latest = max(w.latest_ms for w in day.windows)
    for k in range(int(HOLD_MAX_H / HOLD_STEP_H) + 1):
        resume = int(latest + k * HOLD_STEP_H * 3_600_000)
        ch = _hold(name, resume, min(w.earliest_ms for w in day.windows), run.running, ctx)
        if not check(ch, worst):
            what = "pause" if run.running else "hold"
            finish("hold", f"{what} {run.workload} until {iso_utc(resume)[11:16]} UTC, after the ramp", resume, ch)
            break
    # cap: the most GPUs it may keep (fewer GPUs hold less of the morning)
    cut = _least(lambda c: not check(_cap(name, run.gpus - c, run.gpus), worst), run.gpus - 1)
    if cut is not None:
        keep = run.gpus - cut
        finish("cap", f"cap {run.workload} at {keep} GPUs (of {run.gpus})", keep, _cap(name, keep, run.gpus))
    # reserve: the fewest GPUs each colliding service needs kept from batch
    by_service = {}
    for s in sorted({w.service for w in day.windows if ctx.services[w.service].pool == pool}):
        sa = ctx.services[s]
        lo, hi = 1, int(sa.replays.base.pool.gpus)
        if _reserve_collides(ctx, sa, hi, worst, runs, until):
            by_service = {}
            break
        while lo < hi:
            mid = (lo + hi) // 2
            if _reserve_collides(ctx, sa, mid, worst, runs, until):
                lo = mid + 1
            else:
                hi = mid
        by_service[s] = lo
    if by_service:
        replays = {s: _reserving(ctx.services[s].replays, r) for s, r in by_service.items()}
        # batch pays for every service's reservation: the cost is read on the replay of the largest,
        # with the others' reservations held beside it (what they would keep from batch)
        top = max(by_service, key=lambda x: (by_service[x], x))
        replays[_first(ctx, pool)] = _reserving(ctx.services[top].replays, by_service[top],
                                               _others_reserved(ctx, top, by_service))
        total = sum(by_service.values())
        finish("reserve", f"reserve {total} GPUs for inference ("
               + ", ".join(f"{s} {r}" for s, r in by_service.items()) + ") that batch never touches",
               total, _same, replays, reserve_by_service=by_service)
    ok = [a for a in made if a.avoids]
    if ok:
        best = min(ok, key=lambda a: (a.gpu_hours_delayed + a.gpu_hours_lost, KINDS.index(a.kind)))
        best.recommended = True
    return sorted(made, key=lambda a: KINDS.index(a.kind))


def _least(ok: Callable[[int], bool], most: int, stride: int = 2) -> int | None:
    """The least ``k`` in 1..``most`` with ``ok(k)``: every ``stride``-th until one is, then the ones
    skipped before it (a stretch where ``ok`` holds narrower than ``stride`` can be missed).

    >>> _least(lambda k: k >= 5, 40), _least(lambda k: k >= 5, 3), _least(lambda k: 5 <= k <= 6, 40)
    (5, None, 5)
    """
    k = next((k for k in range(stride, most + 1, stride) if ok(k)), None)
    if k is None:
        return most if most % stride and ok(most) else None
    for j in range(k - stride + 1, k):
        if j >= 1 and ok(j):
            return j
    return k


def _same(jobs: tuple[BatchJob, ...]) -> tuple[BatchJob, ...]:
    return jobs


def _held(jobs: tuple[BatchJob, ...], ctx: Context) -> np.ndarray:
    held = np.zeros(len(ctx.ahead_ms), bool)
    step_ms = ctx.step_s * 1000
    for j in jobs:
        start = j.arrival_ms - step_ms
        held |= (ctx.ahead_ms > start) & (ctx.ahead_ms <= start + j.duration_h * 3_600_000)
    return held


def _move(name: str, hours: float) -> Change:
    def change(jobs: tuple[BatchJob, ...]) -> tuple[BatchJob, ...]:
        j = next(x for x in jobs if x.name == name)
        return _shift(jobs, name, arrival_ms=int(j.arrival_ms + hours * 3_600_000))
    return change


def _cap(name: str, keep: int, gpus: int) -> Change:
    def change(jobs: tuple[BatchJob, ...]) -> tuple[BatchJob, ...]:
        j = next(x for x in jobs if x.name == name)
        return _shift(jobs, name, gpus=keep, duration_h=j.duration_h * gpus / keep)
    return change


def _hold(name: str, resume_ms: int, window_ms: int, running: bool, ctx: Context) -> Change:
    """Not started: its arrival moved to ``resume_ms``. Running: paused at the window's start (no
    earlier than now) and resumed at ``resume_ms`` with what was left and a restore."""
    def change(jobs: tuple[BatchJob, ...]) -> tuple[BatchJob, ...]:
        j = next(x for x in jobs if x.name == name)
        start = j.arrival_ms - ctx.step_s * 1000
        if not running:
            return _shift(jobs, name, arrival_ms=int(max(j.arrival_ms, resume_ms + ctx.step_s * 1000)))
        pause = max(start, window_ms - int(PAUSE_LEAD_H * 3_600_000))
        done_h = max(0.0, (pause - start) / 3_600_000)
        rest_h = max(0.0, j.duration_h - done_h)
        first = replace(j, duration_h=max(ctx.step_s / 3600.0, done_h))
        second = replace(j, name=f"{name}:resumed", arrival_ms=int(resume_ms + ctx.step_s * 1000),
                         duration_h=rest_h + RESTORE_MIN / 60.0)
        return tuple(x for x in jobs if x.name != name) + ((first,) if done_h > 0 else ()) + (second,)
    return change


def _first(ctx: Context, pool: str) -> str:
    return next(x for x, sa in ctx.services.items() if sa.pool == pool)


def _others_reserved(ctx: Context, service: str, by_service: dict[str, int]) -> np.ndarray:
    """GPUs the pool's other services' reservations keep from batch beyond what they usually hold."""
    extra = np.zeros(len(ctx.ahead_ms))
    for o, r in by_service.items():
        if o != service:
            usual = ctx.services[o].replays.run(()).series["inference_gpus"]
            extra += np.maximum(0.0, r - usual)
    return extra


def _reserving(replays: HorizonReplays, gpus: int, extra_others: np.ndarray | None = None) -> HorizonReplays:
    """The service's replays with ``gpus`` reserved for it (partitioned, no soft-shared or spot class),
    and ``extra_others`` more GPUs held by others (other services' reservations)."""
    base = replays.base
    pool = replace(base.pool, reservation_gpus=int(min(gpus, base.pool.gpus)), split_b=0.0,
                   spot_interruptions_per_h=0.0)
    cap = float(base.pool.gpus)
    if extra_others is None:
        return HorizonReplays(replace(base, pool=pool), "partitioned", others_run=replays.others_run)
    others = np.clip(np.asarray(base.others_gpus) + extra_others, 0.0, cap)
    run = None if replays.others_run is None else np.clip(replays.others_run + extra_others, 0.0, cap)
    return HorizonReplays(replace(base, pool=pool, others_gpus=others), "partitioned", others_run=run)


def _reserve_collides(ctx: Context, sa: Any, gpus: int, outcome: Outcome, runs: list[RunAhead],
                      until: tuple[int, int]) -> bool:
    jobs = outcome_jobs(runs, outcome, ctx.at_ms, ctx.step_s)
    held = held_mask(runs, outcome, ctx.ahead_ms, ctx.at_ms)
    base = _windows(ctx, {sa.service: sa.replays.run(jobs, held)})
    return _collides(ctx, {sa.service: _reserving(sa.replays, gpus).run(jobs, held)}, until, base)


def _cost(ctx: Context, pool: str, runs: list[RunAhead], outcome: Outcome, name: str, change: Change,
          replays: dict[str, HorizonReplays] | None) -> tuple[float, float, float]:
    """On the median night: GPU-hours of the run's work done later than it would have been, lost,
    and how many hours its end moves (the what-if's job rows, first service of the pool)."""
    base_jobs = outcome_jobs(runs, outcome, ctx.at_ms, ctx.step_s)
    s = next(x for x, sa in ctx.services.items() if sa.pool == pool)
    base = ctx.services[s].replays.run(base_jobs, _held(base_jobs, ctx))
    jobs = change(base_jobs)
    now = (replays or {}).get(s, ctx.services[s].replays).run(jobs, _held(jobs, ctx))
    step_h = ctx.step_s / 3600.0
    n = len(ctx.ahead_ms)
    b = next(r for r in base.jobs if r["job"] == name)
    end0 = b["end_step"] if b["end_step"] >= 0 else n
    mine = [r for r in now.jobs if r["job"].split(":")[0] == name]
    # a job holds from its first start step through the step it completed
    done = sum(r["gpus"] * max(0, min(end0, r["end_step"] if r["end_step"] >= 0 else n - 1) + 1
                               - max(0, r["first_start_step"])) * step_h
               for r in mine if r["first_start_step"] >= 0)
    delayed = max(0.0, float(b["work_gpu_h"]) - float(done))
    lost = float(sum(r["lost_gpu_h"] for r in mine)) - float(b["lost_gpu_h"])
    end1 = max((r["end_step"] if r["end_step"] >= 0 else n) for r in mine)
    return delayed, max(0.0, lost), (end1 - end0) * step_h
