"""The backtest: the observed period replayed under the observed policy, set against the store.

:func:`replay_result` replays the period as one continuous simulation with every batch run
that happened (the policy table's shared row is that replay); :func:`backtest_from` compares
its violation minutes, batch GPU-hours and p99 with the store's, within the stated tolerances.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.measures import gpu_hours, minutes_over_slo, over_slo
from analytics.slo import SloTable
from analytics.timeline import TimelineConfig, store_timelines
from analytics.times import step_start_ms
from analytics.whatif.fit import weighted_p99
from analytics.whatif.observe import Observation, observe, observed_jobs
from analytics.whatif.outputs import PolicyResult, simulate
from analytics.whatif.params import BatchParams, PoolScenario


def replay_result(obs: Observation, scenario: PoolScenario, policy: str = "shared"
                  ) -> PolicyResult:
    """The observed period under ``policy``, as one continuous simulation: the period's
    traffic, the calibrated service, the pool less what the other services and unmodelled work
    held at each step (when the pool size came from the store), and every batch run that
    happened as a job arriving when it did (:func:`observed_jobs`). A run that waits, is
    evicted or deferred carries its work across midnight; what is left at the period's end is
    reported unfinished.

    On the calibrated scenario of ``obs`` this is ``simulate(scenario, policy)``: the
    policy table's shared row and the backtest are one replay.
    """
    if obs.steps < 2:
        raise NotEnoughDataError("the backtest needs at least two steps")

    jobs, _ = observed_jobs(obs)
    others = scenario.others_gpus if scenario.others_gpus is not None \
        and scenario.others_gpus.shape[0] == obs.steps else None
    full = replace(scenario, traffic_rps=obs.rps, others_gpus=others,
                   start_ts_ms=int(obs.ts_ms[0]), batch=BatchParams(jobs=jobs))
    return simulate(full, policy)


def replay(obs: Observation, scenario: PoolScenario, policy: str = "shared") -> pl.DataFrame:
    """The observed period replayed with the batch runs that really happened
    (:func:`replay_result`), beside what the store saw.

    Columns: ``ts_ms``, ``traffic_rps``, ``p99_ms`` (model), ``observed_p99_ms``,
    ``ready_replicas`` (model), ``observed_ready``, ``batch_gpus`` (model),
    ``observed_batch_gpus``, ``violation`` (model).
    """
    return _frame(obs, replay_result(obs, scenario, policy))


def _frame(obs: Observation, res: PolicyResult) -> pl.DataFrame:
    cols = {k: res.series[k] for k in ("ts_ms", "traffic_rps", "p99_ms", "ready_replicas",
                                       "batch_gpus", "violation")}
    n = cols["ts_ms"].shape[0]
    cols["observed_p99_ms"] = obs.p99_ms[:n]
    cols["observed_ready"] = obs.ready[:n]
    cols["observed_batch_gpus"] = obs.batch_gpus[:n]
    return pl.DataFrame(cols)


# How close the shared replay must come to what happened before the policies are shown as a
# what-if of this pool (issue: "a backtest of everything the replay claims").
BACKTEST_VIOLATION_TOLERANCE = 0.15
BACKTEST_BATCH_TOLERANCE = 0.10
# ...or this close in absolute terms: on a period with a handful of minutes over the SLO a
# relative error says nothing (4 observed against 0 replayed is -100%, and two 5-minute tails).
BACKTEST_VIOLATION_FLOOR_MIN = 10.0
BACKTEST_BATCH_FLOOR_GPU_H = 10.0


def _rel(model: float, observed: float, scale: float) -> float:
    """Relative error; against ``scale`` (the period's size) when nothing was observed."""
    return (model - observed) / observed if observed > 0 else model / max(scale, 1.0)


def backtest_from(obs: Observation, scenario: PoolScenario, *, observed_policy: str = "shared"
                  ) -> dict[str, Any]:
    """Compare the replay (``replay``) with the store: violation minutes, batch GPU-hours, p99.

    Returns ``observed_violation_minutes`` / ``model_violation_minutes`` (the one definition of
    minutes over the SLO, :func:`analytics.measures.minutes_over_slo`) and
    ``violation_minutes_error`` (relative, model vs observed; against the period's minutes when
    nothing was observed); ``observed_batch_gpu_hours`` / ``model_batch_gpu_hours`` (GPUs batch
    held, :func:`analytics.measures.gpu_hours`) and ``batch_gpu_hours_error``; ``within``
    (both inside their tolerances, ``BACKTEST_*_TOLERANCE`` relative or ``BACKTEST_*_FLOOR_*``
    absolute, whichever is larger) and ``misses`` (what is not, in
    words); ``observed_p99_ms`` / ``model_p99_ms`` (the 99th percentile of step p99s weighted
    by requests), ``p99_error``, ``median_step_p99_ratio`` (median of model / observed per
    step), ``agreement`` (share of steps both call the same way against the SLO), ``policy``
    and ``frame`` (``replay``).
    """
    result = replay_result(obs, scenario, observed_policy)
    frame = _frame(obs, result)
    slo = scenario.service.slo_ms
    obs_p99 = frame["observed_p99_ms"].to_numpy()
    mod_p99 = frame["p99_ms"].to_numpy()
    busy = frame["traffic_rps"].to_numpy() > 0
    obs_v = busy & over_slo(obs_p99, slo)
    chance = frame["violation"].to_numpy()  # each step's chance of reading over
    mod_v = chance > 0.5
    ov = minutes_over_slo(np.where(busy, obs_p99, np.nan), slo, step_s=obs.step_s)
    mv = float(result.summary.violation_minutes)  # the policy table's number, the same replay
    period_min = frame.height * obs.step_min
    err = _rel(mv, ov, period_min)
    ob = gpu_hours(frame["observed_batch_gpus"].to_numpy(), step_s=obs.step_s)
    mb = float(result.summary.batch_gpu_hours)
    b_err = _rel(mb, ob, float(scenario.pool.gpus) * period_min / 60.0)
    misses = []
    if abs(mv - ov) > max(BACKTEST_VIOLATION_TOLERANCE * ov, BACKTEST_VIOLATION_FLOOR_MIN):
        misses.append(f"violation minutes {mv:,.0f} replayed vs {ov:,.0f} observed ({err:+.0%}; tolerance "
                      f"{BACKTEST_VIOLATION_TOLERANCE:.0%} or {BACKTEST_VIOLATION_FLOOR_MIN:g} minutes)")
    if abs(mb - ob) > max(BACKTEST_BATCH_TOLERANCE * ob, BACKTEST_BATCH_FLOOR_GPU_H):
        misses.append(f"batch GPU-hours {mb:,.0f} replayed vs {ob:,.0f} observed ({b_err:+.0%}; tolerance "
                      f"{BACKTEST_BATCH_TOLERANCE:.0%} or {BACKTEST_BATCH_FLOOR_GPU_H:g} GPU-hours)")
    weights = frame["traffic_rps"].to_numpy() * obs.step_s
    op, mp = weighted_p99(obs_p99, weights), weighted_p99(mod_p99, weights)
    both = busy & np.isfinite(obs_p99) & (obs_p99 > 0)
    ratio = float(np.median(mod_p99[both] / obs_p99[both])) if both.any() else float("nan")
    return {
        "policy": observed_policy,
        "steps": int(frame.height),
        "observed_violation_minutes": ov,
        "model_violation_minutes": mv,
        "violation_minutes_error": float(err),
        "observed_batch_gpu_hours": ob,
        "model_batch_gpu_hours": mb,
        "batch_gpu_hours_error": float(b_err),
        "within": not misses,
        "misses": misses,
        "observed_p99_ms": op,
        "model_p99_ms": mp,
        "p99_error": float((mp - op) / op) if op and math.isfinite(op) else float("nan"),
        "median_step_p99_ratio": ratio,
        "agreement": float(np.mean(obs_v[busy] == mod_v[busy])) if busy.any() else 1.0,
        "frame": frame,
    }


def backtest(store: Any, scenario: PoolScenario, *, observed_policy: str = "shared",
             service: str | None = None, wmap: Any = None) -> dict[str, Any]:
    """Replay the observed period under the observed policy and compare with the store.

    The period and step are the scenario's; the service is ``service`` or the one named in
    the scenario (``store:<service>``). See ``backtest_from`` for the keys.
    """
    name = service or (scenario.name.split(":", 1)[1] if scenario.name.startswith("store:")
                       else None)
    step_ms = scenario.step_s * 1000
    start = step_start_ms(int(scenario.start_ts_ms), step_ms)
    end = int(scenario.ts_ms()[-1])

    tl = store_timelines(store, TimelineConfig(step_s=scenario.step_s, start_ms=start, end_ms=end), wmap)
    obs = observe(tl.services, tl.pool, tl.holdings, service=name, step_s=scenario.step_s,
                  slos=SloTable.every(scenario.service.slo_ms, "the scenario"))
    return backtest_from(obs, scenario, observed_policy=observed_policy)
