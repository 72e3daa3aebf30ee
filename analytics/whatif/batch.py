"""Batch jobs in the pool: admission, holdings, eviction, checkpoints and goodput.

Jobs are placed one instance at a time, in order of submission, on arrays of free GPUs:
each placement is a few vectorised searches (the first step a job fits, the first step
inference wants its GPUs back, the end of its window) instead of a per-step loop. Later
instances see the GPUs earlier ones hold, so on a conflict the later one (lower priority)
is evicted first.

Work lost per interruption is the compute since the last checkpoint; a planned drain (a
tidal window or a polite release) takes a final checkpoint instead. Checkpoints every tau
minutes cost d minutes each; tau defaults to Young/Daly sqrt(2 d M) - d with M, the mean
running time between interruptions, taken from a first pass without checkpoints.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from analytics.measures import gpu_hours_held
from analytics.whatif.params import BatchJob


@dataclass
class JobRun:
    """One submitted instance of a batch job and what became of it."""

    job: str
    team: str
    release_step: int
    gpus: int  # GPUs it held while running (its request, capped at the region)
    first_start_step: int = -1
    end_step: int = -1  # step it completed (-1: unfinished at the end of the period)
    held_gpu_h: float = 0.0
    goodput_gpu_h: float = 0.0  # work that counts towards completion
    lost_gpu_h: float = 0.0  # compute thrown away by interruptions
    interruptions: int = 0
    running_min: float = 0.0
    work_gpu_h: float = 0.0  # work asked: its hours on all the GPUs it asked for

    @property
    def completed(self) -> bool:
        return self.end_step >= 0

    @property
    def unfinished_gpu_h(self) -> float:
        """Work asked and not done by the end of the period (lost work is redone, so it is
        in here until it is)."""
        return 0.0 if self.completed else max(0.0, self.work_gpu_h - self.goodput_gpu_h)


@dataclass
class BatchRules:
    """How a policy treats batch: where it may run, when, and what interrupts it."""

    region_free: np.ndarray  # GPUs batch could use per step before any job holds them
    eligible: dict[str, np.ndarray | None]  # per job name: steps it may be admitted (None: all)
    preempt: bool = False  # inference wanting GPUs evicts the job
    drain: bool = False  # the window's end stops the job (planned, with a checkpoint)
    admit_always: bool = False  # time-slicing: jobs co-locate instead of waiting
    spot_per_h: float = 0.0  # random interruptions per running hour
    start_overhead_min: float = 0.0  # e.g. a MIG re-split before the job runs
    end_overhead_min: float = 0.0  # e.g. a MIG re-split after a drain
    region_gpus: float = 0.0  # GPUs the region has at most (caps a job's gang)
    seed: int = 0
    # Time-slicing: inference GPUs per step and the slowdown a job suffers on the GPUs it
    # shares with inference (progress rate 1 / (1 + slowdown) there).
    co_located_inference: np.ndarray | None = None
    co_located_slowdown: float = 0.0


@dataclass
class _State:
    """A job instance waiting for (or between) segments."""

    run: JobRun
    job: BatchJob
    g: float  # GPUs it runs on
    remaining: float  # compute minutes on those GPUs still to do
    first: bool = True  # no restore before the first segment


@dataclass
class BatchOutcome:
    held: np.ndarray  # GPUs held by batch per step
    held_by_team: dict[str, np.ndarray]
    runs: list[JobRun] = field(default_factory=list)
    interruptions: int = 0
    running_min: float = 0.0


def instances(jobs: tuple[BatchJob, ...], hour_of_day: np.ndarray, step_min: float,
              start_ts_ms: int | None = None) -> list[tuple[int, BatchJob]]:
    """Submission step of every instance in the period, sorted by submission.

    A run that happened (``arrival_ms`` set) arrives at its own step (the first when it came
    before the period; none when after), counted from ``start_ts_ms`` (the end of the first
    step); the others at each step whose hour is their ``start_hour``.
    """
    n = hour_of_day.shape[0]
    out: list[tuple[int, BatchJob]] = []
    half = 0.5 * step_min / 60.0
    step_ms = step_min * 60_000.0
    for job in jobs:
        if job.arrival_ms >= 0 and start_ts_ms is not None:
            k = max(0, int(math.ceil((job.arrival_ms - start_ts_ms) / step_ms - 1e-9)))
            if k < n:
                out.append((k, job))
            continue
        d = np.abs(((hour_of_day - job.start_hour + 12.0) % 24.0) - 12.0)
        hits = np.flatnonzero(d < half + 1e-9)
        # One hit per day: drop neighbours within a day of each other.
        keep: list[int] = []
        for h in hits.tolist():
            if not keep or h - keep[-1] >= int(1440 / step_min) - 1:
                keep.append(h)
        if not job.daily:
            keep = keep[:1]
        out.extend((k, job) for k in keep if k < n)
    out.sort(key=lambda x: x[0])
    return out


def next_false(mask: np.ndarray) -> np.ndarray:
    """For each step, the first step at or after it where ``mask`` is False (n if none)."""
    n = mask.shape[0]
    idx = np.where(mask, n, np.arange(n))
    return np.minimum.accumulate(idx[::-1])[::-1]


def _first_fit(free: np.ndarray, held: np.ndarray, need: float, elig: np.ndarray | None,
               a: int, b: int, fits: bool) -> int:
    """First step in [a, b) where free - held >= need (or < need when ``fits`` is False)."""
    size = 256
    while a < b:
        e = min(b, a + size)
        room = free[a:e] - held[a:e]
        m = room >= need - 1e-9 if fits else room < need - 1e-9
        if elig is not None and fits:
            m &= elig[a:e]
        i = int(m.argmax())
        if m[i]:
            return a + i
        a = e
        size *= 4
    return -1


def _finish_co_located(rules: BatchRules, held: np.ndarray, g: float, s: int,
                       work_min: float, step_min: float, n: int) -> int:
    """Step after which a time-sliced job has done ``work_min`` undisturbed minutes."""
    pool = rules.region_gpus
    # The rate never drops below 1 / (1 + slowdown): look no further than that bound.
    horizon = min(n, s + int(math.ceil(work_min * (1.0 + rules.co_located_slowdown)
                                       / step_min)) + 2)
    infer = rules.co_located_inference[s:horizon]
    shared = np.clip(infer + held[s:horizon] + g - pool, 0.0, g) / g
    rate = 1.0 - shared * (rules.co_located_slowdown / (1.0 + rules.co_located_slowdown))
    done = np.cumsum(rate) * step_min
    k = int(np.searchsorted(done, work_min - 1e-9))
    if k >= done.size:
        return s + done.size + int(math.ceil((work_min - done[-1]) / step_min)) \
            if done.size else n + 1
    return s + k + 1


def _compute_for(work_min: float, tau: float, d: float) -> float:
    """Wall minutes of compute (with periodic checkpoints) to do ``work_min`` of work."""
    if not math.isfinite(tau) or work_min <= 0:
        return max(work_min, 0.0)
    return work_min + d * max(0, math.ceil(work_min / tau) - 1)


def _saved(elapsed: float, tau: float, d: float, planned: bool) -> tuple[float, float]:
    """(work kept, work lost) after ``elapsed`` compute minutes end a segment."""
    if elapsed <= 0:
        return 0.0, 0.0
    if not math.isfinite(tau):
        if planned:
            kept = max(0.0, elapsed - d)
            return kept, 0.0
        return 0.0, elapsed
    k = math.floor(elapsed / (tau + d))
    rest = elapsed - k * (tau + d)
    if planned:
        return k * tau + max(0.0, min(tau, rest - d)), 0.0
    return k * tau, min(tau, rest)


def schedule(jobs: tuple[BatchJob, ...], rules: BatchRules, hour_of_day: np.ndarray,
             step_min: float, tau_by_job: dict[str, float], start_ts_ms: int | None = None
             ) -> BatchOutcome:
    """Place every job instance; return holdings per step and each instance's fate.

    Segments are placed in time order (a heap of the instances waiting, by the earliest
    step each may start), so a job never sees GPUs that a job starting later will take;
    instances of the same job run one after the other.
    """
    n = hour_of_day.shape[0]
    held = np.zeros(n)
    by_team: dict[str, np.ndarray] = {}
    runs: list[JobRun] = []
    rng = np.random.default_rng(rules.seed)
    nf_cache: dict[int, np.ndarray] = {}
    free = rules.region_free
    pending: dict[str, list[tuple[int, BatchJob]]] = {}
    for release, job in instances(jobs, hour_of_day, step_min, start_ts_ms):
        pending.setdefault(job.name, []).append((release, job))
    for q in pending.values():
        q.reverse()  # pop() gives the earliest

    heap: list[tuple[int, int, _State]] = []
    order = 0

    def submit(name: str, not_before: int) -> None:
        nonlocal order
        q = pending.get(name)
        while q:
            release, job = q.pop()
            g = float(min(job.gpus, rules.region_gpus))
            run = JobRun(job.name, job.team, release, int(g), work_gpu_h=job.gpus * job.duration_h)
            runs.append(run)
            if g <= 0 or job.duration_h <= 0:
                continue
            st = _State(run, job, g, job.duration_h * 60.0 * job.gpus / g)
            heapq.heappush(heap, (max(release, not_before), order, st))
            order += 1
            return

    for name in pending:
        submit(name, 0)
    while heap:
        t, k, st = heapq.heappop(heap)
        job, run, g = st.job, st.run, st.g
        if t >= n:
            continue
        elig = rules.eligible.get(job.name)
        if rules.admit_always:
            s = t
            if elig is not None and not elig[s]:
                ok = np.flatnonzero(elig[s:])
                s = s + int(ok[0]) if ok.size else -1
        else:
            s = _first_fit(free, held, g, elig, t, n, True)
        if s < 0:
            submit(job.name, n)
            continue
        if heap and s > heap[0][0]:
            # Someone else may start earlier and change what is free: come back at s.
            heapq.heappush(heap, (s, k, st))
            continue
        tau = tau_by_job.get(job.name, math.inf)
        d = job.checkpoint_cost_min
        nf = None
        if elig is not None and rules.drain:
            key = id(elig)
            if key not in nf_cache:
                nf_cache[key] = next_false(elig)
            nf = nf_cache[key]
        team_held = by_team.setdefault(job.team, np.zeros(n))
        if run.first_start_step < 0:
            run.first_start_step = s
        overhead = (0.0 if st.first else job.restore_min) + rules.start_overhead_min
        st.first = False
        remaining = st.remaining
        if rules.co_located_inference is not None and rules.co_located_slowdown > 0:
            finish = _finish_co_located(rules, held, g, s, overhead + _compute_for(
                remaining, tau, d), step_min, n)
            # Work is measured in undisturbed minutes: stretch only the wall time.
        else:
            finish = s + math.ceil((overhead + _compute_for(remaining, tau, d)) / step_min
                                   - 1e-9)
        end = min(finish, n)
        cause = "done"
        if nf is not None and nf[s] < end:
            end, cause = int(nf[s]), "drain"
        if rules.preempt:
            c = _first_fit(free, held, g, None, s + 1, end, False)
            if c >= 0:
                end, cause = c, "evict"
        if rules.spot_per_h > 0:
            u = s + math.ceil(rng.exponential(60.0 / rules.spot_per_h) / step_min)
            if u < end:
                end, cause = u, "spot"
        end = max(end, s + 1)
        elapsed = (end - s) * step_min - overhead
        if cause == "done" and end == finish:
            kept, lost = remaining, 0.0
        elif cause == "done":
            # The period ends first: count the work done so far, lose nothing.
            cycles = 0 if not math.isfinite(tau) else math.floor(max(elapsed, 0) / (tau + d))
            kept, lost = min(remaining, max(0.0, elapsed - cycles * d)), 0.0
        else:
            kept, lost = _saved(elapsed, tau, d, planned=(cause == "drain"))
            kept = min(kept, remaining)
        release_at = end
        if cause == "evict":
            release_at = end + math.ceil(job.eviction_delay_min / step_min - 1e-9)
        elif cause == "drain":
            release_at = end + math.ceil(rules.end_overhead_min / step_min - 1e-9)
        release_at = min(max(release_at, s + 1), n)
        held[s:release_at] += g
        team_held[s:release_at] += g
        run.held_gpu_h += gpu_hours_held(g, (release_at - s) * step_min)
        run.goodput_gpu_h += gpu_hours_held(g, kept)
        run.lost_gpu_h += gpu_hours_held(g, lost)
        run.running_min += max(0.0, elapsed)
        st.remaining = remaining - kept
        if cause in ("evict", "spot"):
            run.interruptions += 1
        if cause == "done" and end == finish:
            run.end_step = finish - 1
            st.remaining = 0.0
        if st.remaining > 1e-9 and release_at < n:
            heapq.heappush(heap, (release_at, k, st))
        else:
            submit(job.name, release_at)
    # Instances still queued behind an unfinished one were submitted too: count them.
    for q in pending.values():
        for release, job in q:
            runs.append(JobRun(job.name, job.team, release, int(min(job.gpus, rules.region_gpus)),
                               work_gpu_h=job.gpus * job.duration_h))
    runs.sort(key=lambda r: (r.release_step, r.job))
    total_int = sum(r.interruptions for r in runs)
    total_run = sum(r.running_min for r in runs)
    return BatchOutcome(held, by_team, runs, total_int, total_run)


def young_daly_tau(checkpoint_cost_min: float, mtbi_min: float, step_min: float) -> float:
    """Checkpoint interval sqrt(2 d M) - d (Young/Daly), at least one step; inf if M is."""
    if not math.isfinite(mtbi_min):
        return math.inf
    return max(step_min, math.sqrt(2.0 * checkpoint_cost_min * mtbi_min) - checkpoint_cost_min)


def schedule_with_checkpoints(jobs: tuple[BatchJob, ...], rules: BatchRules,
                              hour_of_day: np.ndarray, step_min: float,
                              start_ts_ms: int | None = None
                              ) -> tuple[BatchOutcome, dict[str, float]]:
    """Schedule twice when a job's interval is automatic and something interrupts jobs.

    Returns the outcome and the checkpoint interval (minutes) used per job.
    """
    fixed = {j.name: (j.checkpoint_interval_min if j.checkpoint_interval_min > 0 else math.inf)
             for j in jobs}
    auto = [j for j in jobs if j.checkpoint_interval_min <= 0]
    first = schedule(jobs, rules, hour_of_day, step_min, fixed, start_ts_ms)
    if not auto or not (rules.preempt or rules.spot_per_h > 0) or first.interruptions == 0:
        return first, fixed
    tau = dict(fixed)
    for j in auto:
        mine = [r for r in first.runs if r.job == j.name]
        k = sum(r.interruptions for r in mine)
        run_min = sum(r.running_min for r in mine)
        tau[j.name] = young_daly_tau(j.checkpoint_cost_min, run_min / k if k else math.inf,
                                     step_min)
    return schedule(jobs, rules, hour_of_day, step_min, tau, start_ts_ms), tau
