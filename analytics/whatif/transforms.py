"""Forward-looking what-ifs: transforms of the observed traffic and batch runs a user chooses.

The calibrated scenario is what happened: the period's traffic and the batch runs that ran
(:func:`analytics.whatif.observe.observed_jobs`). Asking "what if traffic grows 30%", "what
if the jobs were larger" or "what about a typical day's batch" is a choice, never the
default: :func:`apply_transforms` returns a scenario whose provenance names every transform
applied (``transforms``), which the What-if page shows and the CLI's JSON carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from analytics.errors import ConfigError
from analytics.fieldhelp import out_of_bounds
from analytics.whatif.form import parse_value
from analytics.whatif.params import BatchJob, BatchParams, PoolScenario

RECURRING_MIN_DAYS = 2  # a workload seen on this many days is a daily job in a typical day


@dataclass(frozen=True)
class Transforms:
    """The forward-looking what-ifs (each at its neutral value changes nothing)."""

    traffic_growth: float = field(default=1.0, metadata={
        "help": "traffic x this at every step (1.3 = 30% more requests)", "min": 0.1, "max": 10.0,
        "step": 0.05, "unit": "x"})
    batch_gpus_scale: float = field(default=1.0, metadata={
        "help": "larger jobs: each run asks for this many times its GPUs (the same hours, so more "
                "GPU-hours), at most the pool", "min": 0.1, "max": 10.0, "step": 0.05, "unit": "x"})
    batch_repeat: int = field(default=1, metadata={
        "help": "more jobs: each run submitted this many times, arriving together", "min": 1,
        "max": 10, "step": 1, "unit": "x"})
    typical_day: bool = field(default=False, metadata={
        "help": "a typical day's batch instead of the runs that happened: each workload seen on two "
                "days or more becomes one daily job (median GPUs, start hour and length); the rest "
                "one daily job per team"})

    def names(self) -> list[str]:
        """The transforms chosen, as the page and the JSON name them (none: the observed runs)."""
        out = []
        if self.traffic_growth != 1.0:
            out.append(f"traffic x{self.traffic_growth:g}")
        if self.batch_gpus_scale != 1.0:
            out.append(f"batch runs' GPUs x{self.batch_gpus_scale:g}")
        if self.batch_repeat != 1:
            out.append(f"each batch run submitted {self.batch_repeat} times")
        if self.typical_day:
            out.append("a typical day's batch (workloads folded into daily jobs)")
        return out


def transform_specs() -> list[dict[str, Any]]:
    """Name, default, help and bounds of each transform (the page's controls)."""
    return [{"name": f.name, "default": f.default, **f.metadata} for f in fields(Transforms)]


def transforms_from(values: dict[str, Any], prefix: str = "w_x.") -> Transforms:
    """The transforms a link (or a page's state) carries as ``w_x.<name>`` values; a value that
    does not read as its type raises ``ConfigError`` naming it.

    >>> transforms_from({"w_x.traffic_growth": "1.2", "w_x.typical_day": "true", "w_src": "store"}).names()
    ['traffic x1.2', "a typical day's batch (workloads folded into daily jobs)"]
    """

    return Transforms(**{f.name: parse_value(values.get(prefix + f.name, f.default), f.default, prefix + f.name)
                         for f in fields(Transforms)})


def apply_transforms(scn: PoolScenario, t: Transforms) -> PoolScenario:
    """``scn`` with the transforms ``t`` applied and named in ``provenance["transforms"]``;
    ``scn`` itself when none is chosen.

    >>> from analytics.whatif.params import PoolScenario
    >>> s = apply_transforms(PoolScenario(traffic_rps=[1.0, 2.0]), Transforms(traffic_growth=1.5))
    >>> s.traffic_rps.tolist(), s.provenance["transforms"]
    ([1.5, 3.0], 'traffic x1.5')
    """

    for f, v in out_of_bounds(t):
        raise ConfigError(f"what-if transform {f.name}={v} is outside [{f.metadata.get('min')}, "
                          f"{f.metadata.get('max')}]: {f.metadata['help']}")
    names = t.names()
    if not names:
        return scn
    jobs = scn.batch.jobs
    if t.typical_day:
        jobs = typical_day_jobs(scn)
    if t.batch_gpus_scale != 1.0:
        jobs = tuple(replace(j, gpus=int(min(scn.pool.gpus, max(1, round(j.gpus * t.batch_gpus_scale)))))
                     for j in jobs)
    if t.batch_repeat > 1:
        jobs = tuple(replace(j, name=f"{j.name}/{k + 1}" if k else j.name)
                     for j in jobs for k in range(t.batch_repeat))
    prov = {**scn.provenance, "transforms": "; ".join(names)}
    out = replace(scn, traffic_rps=scn.traffic_rps * t.traffic_growth, batch=BatchParams(jobs=jobs),
                  provenance=prov, description=f"{scn.description} - what-if: {'; '.join(names)}")
    out.validate()
    return out


def transforms_of(scn: PoolScenario) -> list[str]:
    """The transforms a scenario was built with (none: what happened)."""
    text = scn.provenance.get("transforms", "")
    return text.split("; ") if text else []


def _circular_median_hour(hours: list[float]) -> float:
    """Median hour of day, cut where the hours are sparsest (02:00 and 23:00 are close)."""
    h = np.sort(np.asarray(hours) % 24.0)
    gaps = np.diff(np.concatenate([h, [h[0] + 24.0]]))
    cut = h[(int(np.argmax(gaps)) + 1) % h.size]
    return float((np.median((h - cut) % 24.0) + cut) % 24.0)


def typical_day_jobs(scn: PoolScenario) -> tuple[BatchJob, ...]:
    """The runs that happened (``name#k`` jobs with an arrival) folded into a typical day: each
    workload seen on ``RECURRING_MIN_DAYS`` days or more one daily job (median GPUs, start
    hour and length), the other runs one daily job per team (their GPU-hours a day). Jobs
    without an arrival are kept."""
    runs = [j for j in scn.batch.jobs if j.arrival_ms >= 0]
    kept = [j for j in scn.batch.jobs if j.arrival_ms < 0]
    days = max(scn.steps * scn.step_s / 86400.0, 1.0)
    by_workload: dict[str, list[BatchJob]] = {}
    for j in runs:
        by_workload.setdefault(j.name.split("#", 1)[0], []).append(j)
    jobs: list[BatchJob] = []
    adhoc: dict[str, list[BatchJob]] = {}
    for name, rs in sorted(by_workload.items()):
        run_days = {j.arrival_ms // 86_400_000 for j in rs}
        if len(run_days) < RECURRING_MIN_DAYS:
            adhoc.setdefault(rs[0].team, []).extend(rs)
            continue
        dur = float(np.median([j.duration_h for j in rs]))
        jobs.append(replace(rs[0], name=name, gpus=int(round(float(np.median([j.gpus for j in rs])))),
                            start_hour=round(_circular_median_hour([j.start_hour for j in rs]) * 4) / 4 % 24,
                            duration_h=round(min(dur, 23.75) * 4) / 4 or 0.25, daily=True, arrival_ms=-1))
    for team, rs in sorted(adhoc.items()):
        gpu_h_day = sum(j.gpus * j.duration_h for j in rs) / days
        gpus = int(max(1, round(float(np.median([j.gpus for j in rs])))))
        jobs.append(replace(rs[0], name=f"ad-hoc-{team}", gpus=gpus,
                            start_hour=round(_circular_median_hour([j.start_hour for j in rs]) * 4) / 4 % 24,
                            duration_h=min(23.75, max(0.25, math.floor(gpu_h_day / gpus * 4 + 0.5) / 4)),
                            daily=True, arrival_ms=-1))
    return tuple(kept + jobs)
