"""Batch work: the nightly fine-tune and ad-hoc training/eval jobs, as Kueue would see them.

Jobs are planned up front from their own random stream (so a counterfactual run "without
batch" simply plans none); when they are admitted is decided by the pool simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.sample.cluster import BatchConfig
from analytics.sample.traffic import MIN_PER_DAY

FINETUNE = "nightly-finetune"
# base name -> (namespace, team)
JOB_KINDS: dict[str, tuple[str, str]] = {
    "train-embed": ("ml-training", "ml-research"),
    "train-ranker": ("ml-training", "recsys"),
    "batch-featurize": ("data-pipelines", "data-eng"),
    "eval-chat": ("ml-training", "ml-research"),
}


@dataclass(frozen=True)
class BatchJob:
    """One batch workload: what it asks for and when it is submitted."""

    job_id: str  # unique per run, e.g. nightly-finetune-20261006
    job: str  # the Kubernetes Job name, the workload of its pods
    namespace: str
    team: str
    gpus_min: int
    gpus_max: int  # elastic jobs take up to this many
    submit_min: int
    duration_min: int
    leave_free: int = 0  # GPUs an elastic job leaves free when it is admitted
    priority_class: str = "training-low"


def _day_tag(start_day_ord: int, day: int) -> str:
    from datetime import date
    return date.fromordinal(start_day_ord + day).strftime("%Y%m%d")


def plan_jobs(cfg: BatchConfig, days: int, start_day_ord: int, rng: np.random.Generator) -> list[BatchJob]:
    """All batch jobs of the run, ordered by submission time."""
    jobs: list[BatchJob] = []
    kinds = list(JOB_KINDS)
    for d in range(days):
        weekday = d % 7
        # The night after Monday..Friday's work days: Tuesday..Saturday 02:00 belong to weekdays;
        # we run it on weekday mornings (Mon-Fri) so it collides with weekday ramps.
        ft_draw, ft_len = rng.random(), rng.uniform(*cfg.finetune_hours)
        ft_len += cfg.finetune_drift_h_per_day * max(0, d - cfg.finetune_drift_from_day)
        if cfg.finetune and weekday < 5 and ft_draw < cfg.finetune_weekday_prob:
            jobs.append(BatchJob(
                job_id=f"{FINETUNE}-{_day_tag(start_day_ord, d)}", job=FINETUNE, namespace="ml-training",
                team="ml-research", gpus_min=8, gpus_max=cfg.finetune_max_gpus,
                submit_min=d * MIN_PER_DAY + int(cfg.finetune_hour_utc * 60),
                duration_min=int(ft_len * 60), leave_free=cfg.finetune_leave_free))
        n = int(rng.poisson(cfg.jobs_per_day))
        for k in range(n):
            base = kinds[int(rng.integers(len(kinds)))]
            ns, team = JOB_KINDS[base]
            g = int(rng.choice(cfg.job_gpus))
            submit = d * MIN_PER_DAY + int(rng.uniform(*cfg.job_submit_hours) * 60)
            length = int(rng.uniform(*cfg.job_hours) * 60)
            name = f"{base}-{_day_tag(start_day_ord, d)[4:]}{chr(ord('a') + k)}"
            jobs.append(BatchJob(job_id=name, job=name, namespace=ns, team=team, gpus_min=g,
                                 gpus_max=g, submit_min=submit, duration_min=length))
    jobs.sort(key=lambda j: (j.submit_min, j.job_id))
    return jobs
