"""The seven pool policies: who gets which GPUs at each step.

Each policy is expressed as rules over the same pieces, so they differ only where the
policies differ: the autoscaler's target (from traffic, vectorised), the GPUs batch may use
and when (``analytics.whatif.batch``), the GPUs inference may use, and how fast a slot serves
(time-slicing and soft-shared slots are slowed). Replicas become ready after the warm-up:
the ready count at a step is the least allocated over the warm-up window before it (the
replicas that have held a GPU throughout), which is exact when the newest replicas are
the first removed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from analytics.errors import ConfigError
from analytics.whatif.batch import BatchOutcome, BatchRules, JobRun, schedule_with_checkpoints
from analytics.whatif.mig import MigLayout, choose_layout
from analytics.whatif.params import PoolScenario

POLICIES: tuple[str, ...] = ("shared", "polite", "preemption", "tidal", "partitioned", "mig",
                             "timeslice")

POLICY_HELP: dict[str, str] = {
    "shared": "work-conserving pool: batch admitted when GPUs are free, holds until done",
    "polite": "shared, but batch releases its GPUs at a set hour; inference still pays warm-up",
    "preemption": "Kueue-style priorities: inference evicts batch (eviction delay, work since "
                  "the last checkpoint lost, restore)",
    "tidal": "batch only inside the tidal window, drained before the ramp; inference pre-scales "
             "from yesterday's curve",
    "partitioned": "A: inference reservation batch never touches; B: soft-shared overflow "
                   "(slowed); C: spot for batch with interruptions",
    "mig": "inference on MIG slices (a valid placement of the GPU model), batch on whole GPUs "
           "in the tidal window; re-splitting drains GPUs twice a day",
    "timeslice": "co-located without isolation: batch always runs, inference slowed while "
                 "batch shares its GPU",
}

# The team charged when soft-shared (class B) tenants slow inference.
CLASS_B_TEAM = "class-B tenants"


@dataclass
class CapacityTrace:
    """Per-step capacity of one policy, before latency."""

    policy: str
    desired_replicas: np.ndarray
    ready_replicas: np.ndarray
    servers: np.ndarray
    mu_rps: np.ndarray  # service rate per slot per step (after interference)
    inference_gpus: np.ndarray  # GPU-equivalents held by inference (warming + ready)
    batch_gpus: np.ndarray  # GPUs held by batch
    allocated_gpus: np.ndarray  # GPUs held by anything (a co-located GPU counts once)
    blame_by_team: dict[str, np.ndarray]  # weight per step of each team in slowing inference
    runs: list[JobRun]
    gpus_by_price: dict[str, float]  # GPUs paid at the reserved / spot / on-demand price
    pool_gpus: int
    checkpoint_interval_min: dict[str, float]
    mean_interruption_interval_min: float
    layout: MigLayout | None = None
    notes: list[str] = field(default_factory=list)


def _trailing(x: np.ndarray, window: int, op: str) -> np.ndarray:
    """Trailing max/min over ``window`` steps (the step itself and the ones before)."""
    if window <= 1 or x.shape[0] == 0:
        return x.copy()
    # The first value repeats before the start (the period starts in steady state), as scipy's
    # maximum_filter1d(mode="nearest", origin=(window - 1) // 2) has it; numpy's windows spare
    # every replay scipy.ndimage's import (a second of a warm `tidelens review` under load), and
    # the windows are minutes of steps, so the window's pass costs less than the import.
    padded = np.concatenate([np.full(window - 1, x[0], dtype=x.dtype), x])
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)
    return windows.max(axis=1) if op == "max" else windows.min(axis=1)


def _in_window(hours: np.ndarray, start_h: float, end_h: float) -> np.ndarray | None:
    """Steps whose hour lies in [start, end), crossing midnight when start > end."""
    if abs(start_h - end_h) < 1e-9:
        return None
    if start_h < end_h:
        return (hours >= start_h) & (hours < end_h)
    return (hours >= start_h) | (hours < end_h)


def desired_replicas(scn: PoolScenario, replica_rps: float, *, prewarm: bool,
                     max_replicas: int | None = None) -> np.ndarray:
    """The autoscaler's target per step: traffic over replica capacity at the target use,
    within [min_replicas, max_replicas] (``max_replicas`` overrides the service's).

    Scale-down waits for the cooldown (a trailing max); ``prewarm`` adds yesterday's target
    one warm-up ahead (a scheduled scale-up that knows the daily curve).
    """
    svc = scn.service
    raw = np.ceil(scn.traffic_rps / (replica_rps * svc.target_utilization) - 1e-9)
    top = svc.max_replicas if max_replicas is None else max_replicas
    raw = np.clip(raw, svc.min_replicas, max(top, svc.min_replicas))
    steps_per_min = 60.0 / scn.step_s
    want = _trailing(raw, int(round(svc.cooldown_min * steps_per_min)) + 1, "max")
    if prewarm:
        day = int(86400 / scn.step_s)
        lead = int(math.ceil(svc.warmup_min * steps_per_min)) + 1
        shift = day - lead
        if 0 < shift < want.shape[0]:
            ahead = np.zeros_like(want)
            ahead[shift:] = want[:-shift]
            want = np.maximum(want, ahead)
    return want


def reservation(scn: PoolScenario) -> tuple[int, str]:
    """GPUs the inference class owns (``pool.reservation_gpus``), and where the number came from.

    ``-1`` (automatic) is what the peak needed plus the headroom: the autoscaler's desired
    replicas at peak traffic (:func:`desired_replicas`, the calibrated target and maximum)
    times GPUs per replica, times ``1 + pool.headroom``, rounded up, at most the GPUs the pool
    has beside what others hold at their most. The one number the partitioned policy, the
    MIG policy and the three-pool plan all use.

    >>> from analytics.whatif.params import PoolParams, PoolScenario, ServiceParams
    >>> s = PoolScenario(traffic_rps=np.array([10.0, 100.0]), service=ServiceParams(
    ...     service_rate_per_slot_rps=1.0, concurrency=10, target_utilization=0.5),
    ...     pool=PoolParams(gpus=64, headroom=0.5))
    >>> reservation(s)
    (30, 'what the peak needed: 20 desired replicas x 1 GPUs per replica, plus 50% headroom')
    >>> from dataclasses import replace
    >>> reservation(replace(s, pool=PoolParams(gpus=1, headroom=0.5, split_b=1.0)))[1][-40:]
    '(1 GPUs in the pool): nothing to reserve'
    """
    pool, svc = scn.pool, scn.service
    if pool.reservation_gpus >= 0:
        return int(pool.reservation_gpus), "set"
    want = desired_replicas(scn, svc.service_rate_per_slot_rps * svc.concurrency, prewarm=False)
    peak = float(np.max(want, initial=0.0))
    need = int(math.ceil(peak * svc.gpus_per_replica * (1.0 + pool.headroom) - 1e-9))
    room = int(max(0.0, pool.gpus - round(pool.split_b * pool.gpus) - float(np.max(scn.others(), initial=0.0))))
    got = min(need, room)
    why = (f"what the peak needed: {peak:g} desired replicas x {svc.gpus_per_replica} GPUs per replica, "
           f"plus {pool.headroom:.0%} headroom")
    if got < need and room > 0:
        why += f" ({need}; capped at the {room} GPUs the pool has beside class B and what others hold)"
    elif got < need:  # never "capped at the 0 GPUs": say there is nothing to reserve, and why
        why += (f" ({need}), but the pool has no GPU beside class B and what others hold at their most "
                f"({pool.gpus} GPUs in the pool): nothing to reserve")
    return got, why


def capacity(scn: PoolScenario, policy: str) -> CapacityTrace:
    """Run the capacity side of ``policy`` on ``scn``: replicas, batch holdings, blame."""
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    svc, pool = scn.service, scn.pool
    n = scn.steps
    step_min = scn.step_s / 60.0
    hours = scn.hour_of_day()
    pool_gpus = float(pool.gpus)
    # GPUs other services and unmodelled work hold, as observed: no policy moves them.
    others = np.minimum(scn.others(), pool_gpus)
    avail = pool_gpus - others
    reserved, _ = reservation(scn)
    mu = svc.service_rate_per_slot_rps
    layout: MigLayout | None = None
    per_gpu = 1.0 / svc.gpus_per_replica  # replicas per GPU
    max_replicas = svc.max_replicas
    notes: list[str] = []
    if policy == "mig":
        if svc.gpus_per_replica != 1:
            # A replica spanning GPUs cannot live on a slice: serve on whole GPUs and keep
            # the rest of the scheme (tidal batch, re-split drains).
            notes.append("MIG not applicable: a replica needs "
                         f"{svc.gpus_per_replica} GPUs; inference runs on whole GPUs")
        else:
            peak = min(float(np.max(scn.traffic_rps, initial=0.0))
                       / max(mu * svc.concurrency * svc.target_utilization, 1e-12),
                       svc.max_replicas)
            layout = choose_layout(pool.gpu_model, svc.model_memory_gib, svc.decode_heavy, mu,
                                   svc.slo_ms, pool.mig_profile,
                                   latency_floor_ms=svc.latency_floor_ms,
                                   service_in_latency=svc.service_in_latency,
                                   peak_replicas=peak)
            mu = mu * layout.speed
            per_gpu = float(layout.instances)
            # The autoscaler's maximum is a capacity ceiling in whole-GPU replicas (what
            # calibration observes); on slices of speed s the same ceiling is 1/s replicas.
            # Kept in replicas, a 1g slice at 1/4 speed would cap inference at a quarter
            # of the capacity the service really had, and the peak would queue.
            max_replicas = int(min(100000, math.ceil(svc.max_replicas / layout.speed - 1e-9)))
    prewarm = policy in ("tidal", "mig")
    want = desired_replicas(scn, mu * svc.concurrency, prewarm=prewarm,
                            max_replicas=max_replicas)
    need_gpus = np.ceil(want / per_gpu - 1e-9)

    a_gpus = b_gpus = 0.0
    gpus_by_price = {"reserved": pool_gpus, "spot": 0.0, "on_demand": 0.0}
    job_names = [j.name for j in scn.batch.jobs]
    eligible: dict[str, np.ndarray | None] = {name: None for name in job_names}
    rules = BatchRules(region_free=avail - need_gpus, eligible=eligible,
                       region_gpus=pool_gpus, seed=pool.seed)
    if policy == "polite":
        # One window per start hour: the runs that happened are many jobs at a few hours.
        windows: dict[float, np.ndarray | None] = {}
        for j in scn.batch.jobs:
            if j.start_hour not in windows:
                windows[j.start_hour] = _in_window(hours, j.start_hour, pool.polite_release_hour)
            eligible[j.name] = windows[j.start_hour]
        rules.drain = True
    elif policy == "preemption":
        rules.preempt = True
    elif policy in ("tidal", "mig"):
        win = _in_window(hours, pool.tidal_start_hour, pool.tidal_end_hour)
        for name in job_names:
            eligible[name] = win
        rules.drain = win is not None
        if policy == "mig":
            rules.start_overhead_min = pool.mig_resplit_drain_min
            rules.end_overhead_min = pool.mig_resplit_drain_min
    elif policy == "partitioned":
        a_gpus = float(reserved)
        b_total = float(round(pool.split_b * pool_gpus))
        c_gpus = pool_gpus - a_gpus - b_total
        # Other services and unmodelled work keep what they held, in the soft-shared class B
        # first, then in C (the reservation is this service's alone).
        b_gpus = np.maximum(b_total - others, 0.0)
        rules.region_free = np.maximum(c_gpus - np.maximum(others - b_total, 0.0), 0.0)
        rules.region_gpus = c_gpus
        rules.spot_per_h = pool.spot_interruptions_per_h
        gpus_by_price = {"reserved": a_gpus + b_total, "spot": c_gpus, "on_demand": 0.0}
    elif policy == "timeslice":
        rules.region_free = avail.copy()
        rules.region_gpus = float(np.min(avail, initial=pool_gpus))
        rules.admit_always = True
        # Both sides of a time-sliced GPU slow down: batch progresses at 1 / (1 + f) there.
        rules.co_located_inference = np.minimum(need_gpus, avail)
        rules.co_located_slowdown = _timeslice_slowdown(pool)

    jobs = scn.batch.jobs if pool.checkpoint_interval_min < 0 else tuple(
        replace(j, checkpoint_interval_min=pool.checkpoint_interval_min) for j in scn.batch.jobs)  # one for all
    outcome, tau = schedule_with_checkpoints(jobs, rules, hours, step_min, scn.start_ts_ms)
    held = outcome.held

    slow = np.zeros(n)  # share of inference replicas slowed by co-location
    if policy == "partitioned":
        alloc_gpus = np.minimum(need_gpus, a_gpus + b_gpus)
        slow = np.maximum(alloc_gpus - a_gpus, 0.0) / np.maximum(alloc_gpus, 1.0)
    elif policy == "timeslice":
        alloc_gpus = np.minimum(need_gpus, avail)
        overlap = np.maximum(alloc_gpus + held - avail, 0.0)
        slow = np.minimum(overlap / np.maximum(alloc_gpus, 1.0), 1.0)
    else:
        alloc_gpus = np.minimum(need_gpus, np.maximum(avail - held, 0.0))
        if policy == "mig":
            # the GPUs MIG splits for inference are the reservation: no more are sliced
            alloc_gpus = np.minimum(alloc_gpus, float(reserved))
    alloc_rep = np.minimum(want, np.floor(alloc_gpus * per_gpu + 1e-9))
    warm = int(math.ceil(svc.warmup_min / step_min - 1e-9))
    ready = _trailing(alloc_rep, warm + 1, "min")
    f = _timeslice_slowdown(pool) if policy == "timeslice" else pool.timeslice_interference
    mu_steps = mu * ((1.0 - slow) + slow / (1.0 + f))

    # GPU-equivalents inference holds: whole GPUs per replica, or on MIG the instances in
    # use as a share of the GPU's instances (the slices a placement leaves idle are counted
    # as held: nothing else can use them).
    infer_eq = alloc_rep / per_gpu
    if policy == "timeslice":
        allocated = np.minimum(alloc_gpus + held, avail) + others
    else:
        allocated = alloc_gpus + held + others

    blame = _blame(policy, need_gpus, alloc_gpus, slow, outcome, warm)
    mtbi = (outcome.running_min / outcome.interruptions) if outcome.interruptions else math.inf
    return CapacityTrace(
        policy=policy, desired_replicas=want, ready_replicas=ready,
        servers=ready * svc.concurrency, mu_rps=mu_steps, inference_gpus=infer_eq,
        batch_gpus=held, allocated_gpus=allocated, blame_by_team=blame, runs=outcome.runs,
        gpus_by_price=gpus_by_price, pool_gpus=pool.gpus, checkpoint_interval_min=tau,
        mean_interruption_interval_min=mtbi, layout=layout, notes=notes)


def _timeslice_slowdown(pool: Any) -> float:
    """Extra service time on a time-sliced GPU: the interference once per pod beyond the first.

    >>> from analytics.whatif.params import PoolParams
    >>> _timeslice_slowdown(PoolParams(timeslice_interference=0.6, timeslice_replicas=4))
    1.7999999999999998
    """
    return float(pool.timeslice_interference) * (int(pool.timeslice_replicas) - 1)


def _blame(policy: str, need: np.ndarray, alloc: np.ndarray, slow: np.ndarray,
           outcome: BatchOutcome, warm: int) -> dict[str, np.ndarray]:
    """Weight per step of each team in keeping inference short of what it wanted.

    A step is blamed on batch when inference was refused GPUs batch held at any time in
    the warm-up window before it (GPUs freed late still arrive cold), in proportion to the
    shortfall those GPUs explain, or when batch shared (time-sliced) its GPUs; the weights
    split that blame by the GPUs each team held. Partitioned class-B slowdowns go to the
    soft-shared tenants.
    """
    out: dict[str, np.ndarray] = {}
    if policy == "partitioned":
        if slow.any():
            out[CLASS_B_TEAM] = (slow > 0).astype(np.float64)
        return out
    if policy == "timeslice":
        total = outcome.held
        on = slow > 0
        for team, h in outcome.held_by_team.items():
            out[team] = np.where(on, h / np.maximum(total, 1e-12), 0.0)
        return out
    gap = np.where(outcome.held > 0, np.maximum(need - alloc, 0.0), 0.0)
    if not (gap > 1e-9).any():
        return out
    # Batch explains at most the GPUs it held of the shortfall; the rest (a pool too small
    # even without batch) stays with the service.
    gap_recent = _trailing(gap, warm + 1, "max")
    held_recent = {t: _trailing(h, warm + 1, "max") for t, h in outcome.held_by_team.items()}
    total = sum(held_recent.values())
    explained = np.where(gap_recent > 1e-9,
                         np.minimum(total, gap_recent) / np.maximum(gap_recent, 1e-12), 0.0)
    for team, h in held_recent.items():
        out[team] = explained * h / np.maximum(total, 1e-12)
    return out
