"""The horizon replayed by the what-if: each outcome's runs as jobs, on the forecast traffic.

The minutes over the SLO of an outcome are the what-if's (:func:`analytics.whatif.simulate` on
the service as it was calibrated from the store), never a model of their own: the traffic is the
rhythm's norm ahead, the pool is the calibrated pool, the GPUs others hold are their usual
holdings at that time of day (and what the pool's other services want, from their own replays),
and the batch runs are the outcome's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from analytics.forecast.runs_ahead import RunAhead
from analytics.forecast.outcomes import Outcome
from analytics.whatif.outputs import PolicyResult, simulate
from analytics.whatif.params import BatchJob, BatchParams, PoolScenario


def job_name(run: RunAhead, index: int) -> str:
    """The replay's name of a run ahead (unique in one forecast)."""
    return f"{run.workload}#{index}"


def outcome_jobs(runs: list[RunAhead], outcome: Outcome, at_ms: int, step_s: int) -> tuple[BatchJob, ...]:
    """The outcome's runs as the what-if's jobs: a running run from the first step ahead for what is
    left of it, a run to come from its start for its whole length, each on its GPUs."""
    step_ms = step_s * 1000
    jobs = []
    for i, end in outcome.ends:
        r = runs[i]
        start = at_ms if r.running else max(at_ms, r.start_ms)
        hours = max(step_s, (end - start) / 1000.0) / 3600.0
        jobs.append(BatchJob(name=job_name(r, i), team=r.team, gpus=max(1, int(r.gpus)), start_hour=0.0,
                             duration_h=hours, daily=False, arrival_ms=int(start + step_ms)))
    return tuple(jobs)


def held_mask(runs: list[RunAhead], outcome: Outcome, ahead_ms: np.ndarray, at_ms: int) -> np.ndarray:
    """The steps ahead some run of the outcome holds its GPUs (from its start to its end)."""
    held = np.zeros(len(ahead_ms), bool)
    for i, end in outcome.ends:
        r = runs[i]
        start = at_ms if r.running else max(at_ms, r.start_ms)
        held |= (ahead_ms > start) & (ahead_ms <= end)
    return held


@dataclass
class HorizonReplays:
    """One service's calibrated scenario on the horizon, and its replays kept by their jobs.

    ``others_run`` is what others are expected to hold while a run holds GPUs (the pool's other
    services starved too), the scenario's own ``others_gpus`` what they hold when none does."""

    base: PoolScenario
    policy: str
    others_run: np.ndarray | None = None
    cache: dict[tuple[BatchJob, ...], PolicyResult] = field(default_factory=dict)

    def run(self, jobs: tuple[BatchJob, ...], held: np.ndarray | None = None) -> PolicyResult:
        """The horizon replayed with ``jobs``, others as usual while ``held`` (the same jobs replay once)."""
        if jobs not in self.cache:
            scn = replace(self.base, batch=BatchParams(jobs=jobs))
            if held is not None and self.others_run is not None and held.any():
                scn = replace(scn, others_gpus=np.where(held, self.others_run, self.base.others_gpus))
            self.cache[jobs] = simulate(scn, self.policy)
        return self.cache[jobs]


def horizon_scenario(calibrated: PoolScenario, traffic_rps: np.ndarray, others_gpus: np.ndarray,
                     at_ms: int, step_s: int) -> PoolScenario:
    """The calibrated service and pool on the horizon's traffic and others' holdings (no batch yet)."""
    pool = float(calibrated.pool.gpus)
    scn = replace(calibrated, traffic_rps=np.clip(np.nan_to_num(traffic_rps), 0.0, None),
                  others_gpus=np.clip(np.nan_to_num(others_gpus), 0.0, pool), start_ts_ms=int(at_ms + step_s * 1000),
                  step_s=step_s, batch=BatchParams(jobs=()), name=f"forecast:{calibrated.name.split(':', 1)[-1]}",
                  description="the horizon ahead: the rhythm's traffic, the usual others, the outcome's runs",
                  provenance=dict(calibrated.provenance))
    scn.validate()
    return scn
