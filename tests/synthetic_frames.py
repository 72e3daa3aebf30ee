"""Hand-made timeline frames with known causes, for unit tests and examples.

A single service in one pool at 1-minute steps: a diurnal traffic curve with a 09:30 ramp, an
autoscaler that asks for ``ceil(rps / target)`` replicas, replicas that serve after a warm-up
when a GPU is free, and p99 from a simple queueing-shaped curve of load per replica. Days can
carry a 02:00 batch job that takes every free GPU until a release hour (contention at the
ramp), a traffic surge, or a slow warm-up (scaling lag). The truth is returned beside the
frames. The project's full simulator is :mod:`analytics.sample`; this one only exists so the
attribution maths can be tested on frames whose cause is known by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

DAY_MIN = 1440


@dataclass
class SynthDay:
    """What happens on one day (minutes of day, UTC)."""

    batch_from_min: int | None = None     # batch admitted, takes every free GPU
    batch_until_min: int | None = None    # batch releases everything
    surge_from_min: int | None = None
    surge_until_min: int | None = None
    surge_factor: float = 2.0
    warmup_min: int | None = None         # slower warm-up this day (scaling lag)


@dataclass
class SynthSpec:
    days: list[SynthDay] = field(default_factory=lambda: [SynthDay() for _ in range(7)])
    gpus: int = 24
    warmup_min: int = 5
    target_rps: float = 10.0              # rps per replica the autoscaler aims at
    service_rps: float = 20.0             # rps per replica where latency blows up
    base_ms: float = 40.0
    seed: int = 0
    start_ms: int = 1_767_225_600_000     # 2026-01-01T00:00:00Z
    service: str = "chat"
    batch_workload: str = "nightly-finetune"
    batch_team: str = "ml-research"


def traffic_profile(minute_of_day: np.ndarray) -> np.ndarray:
    """Night 20 rps, 09:30-10:30 ramp to 100 rps, flat, 20:00-23:00 decline."""
    m = minute_of_day
    ramp = np.clip((m - 570) / 60.0, 0, 1)
    fall = np.clip((m - 1200) / 180.0, 0, 1)
    return 20 + 80 * ramp * (1 - fall)


def build(spec: SynthSpec) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, list[dict]]:
    """Return ``(services, pools, holdings, truth)``; ``truth`` lists each day's designed cause."""
    rng = np.random.default_rng(spec.seed)
    n = len(spec.days) * DAY_MIN
    mod = np.arange(n) % DAY_MIN
    day_of = np.arange(n) // DAY_MIN
    rps = traffic_profile(mod) * np.exp(rng.normal(0, 0.03, n))
    batch_on = np.zeros(n, bool)
    warm = np.full(n, spec.warmup_min)
    for d, day in enumerate(spec.days):
        sl = day_of == d
        if day.surge_from_min is not None:
            rps[sl & (mod >= day.surge_from_min) & (mod < day.surge_until_min)] *= day.surge_factor
        if day.batch_from_min is not None:
            batch_on[sl & (mod >= day.batch_from_min) & (mod < day.batch_until_min)] = True
        if day.warmup_min is not None:
            warm[sl] = day.warmup_min
    desired = np.maximum(1, np.ceil(rps / spec.target_rps))
    ready = np.zeros(n)
    batch = np.zeros(n)
    warming: list[tuple[int, int]] = []   # (ready_at_step, count)
    r, b = float(desired[0]), 0.0
    for t in range(n):
        if batch_on[t] and (t == 0 or not batch_on[t - 1]):
            b = spec.gpus - r - sum(c for _, c in warming)  # takes every free GPU and keeps it
        if not batch_on[t]:
            b = 0.0
        r += sum(c for at, c in warming if at == t)
        warming = [(at, c) for at, c in warming if at > t]
        pending = sum(c for _, c in warming)
        want = desired[t] - r - pending
        if want > 0:
            free = spec.gpus - r - pending - b
            add = min(want, max(free, 0))
            if add > 0:
                warming.append((t + int(warm[t]), add))
        elif desired[t] < r:
            r = desired[t]
        ready[t], batch[t] = r, b
    x = rps / np.maximum(ready, 0.5)
    rho = np.minimum(x / spec.service_rps, 0.995)
    p99 = spec.base_ms * (1 + 0.4 * rho / (1 - rho)) * np.exp(rng.normal(0, 0.04, n))
    ts = spec.start_ms + (np.arange(n) + 1) * 60_000
    tsd = pl.Series("ts", ts).cast(pl.Datetime("ms", "UTC"))
    services = pl.DataFrame({"ts": tsd, "service": spec.service, "pool": "default", "rps": rps, "p50_ms": p99 / 3,
                             "p95_ms": p99 / 1.5, "p99_ms": p99, "replicas": ready, "desired_replicas": desired,
                             "ready_replicas": ready})
    idle = spec.gpus - ready - batch
    pools = pl.DataFrame({"ts": tsd, "pool": "default", "gpus_total": float(spec.gpus), "gpus_inference": ready,
                          "gpus_batch": batch, "gpus_other": 0.0, "gpus_unknown": 0.0, "gpus_idle": idle})
    hold_inf = pl.DataFrame({"ts": tsd, "pool": "default", "cls": "inference", "team": "serving",
                             "workload": spec.service, "gpus": ready})
    hold_b = pl.DataFrame({"ts": tsd, "pool": "default", "cls": "batch", "team": spec.batch_team,
                           "workload": spec.batch_workload, "gpus": batch}).filter(pl.col("gpus") > 0)
    holdings = pl.concat([hold_inf, hold_b])
    truth = []
    for d, day in enumerate(spec.days):
        cause = ("batch_contention" if day.batch_from_min is not None else
                 "traffic_surge" if day.surge_from_min is not None else
                 "scaling_lag" if day.warmup_min is not None else None)
        truth.append({"day": d, "cause": cause})
    return services, pools, holdings, truth
