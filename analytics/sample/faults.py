"""Degraded replicas: a serving pod that answers slowly for a while, with nothing else wrong.

A throttled, overheating or failing GPU makes one replica slow: the requests it serves take
``slowdown`` x longer in their measured phase, while traffic, capacity and batch are as they
were. Planned from their own random stream, so the counterfactual runs (without batch, without
surges) keep the same faults, and a run without faults (the truth's ``no_fault``) changes nothing
but them. Which requests a degraded replica serves is a share ``1 / serving replicas`` of the
minute's draws (:func:`analytics.sample.latency.draw_latency`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.sample.cluster import ScenarioConfig
from analytics.sample.traffic import MIN_PER_DAY


@dataclass(frozen=True)
class Fault:
    """One replica of ``service`` degraded over ``[start_min, end_min)``."""

    service: str
    start_min: int
    end_min: int
    slowdown: float


def plan_faults(scenario: ScenarioConfig, days: int, rng: np.random.Generator) -> list[Fault]:
    """Pick the nights, start times and lengths of the degradations (none when ``nights`` is 0)."""
    cfg = scenario.faults
    n = int(round(cfg.nights * days / 21.0))
    if n <= 0 or not scenario.services:
        return []
    nights = sorted(rng.choice(days, size=min(n, days), replace=False).tolist())
    out = []
    for d in nights:
        start = d * MIN_PER_DAY + int(rng.uniform(*cfg.hours_utc) * 60)
        length = int(rng.integers(cfg.minutes[0], cfg.minutes[1] + 1))
        out.append(Fault(scenario.services[0].name, start, min(start + length, days * MIN_PER_DAY),
                         float(cfg.slowdown)))
    return out


def degraded_replicas(faults: list[Fault], service: str, n_min: int) -> np.ndarray:
    """Degraded serving replicas of ``service`` per minute (0 outside its faults)."""
    out = np.zeros(n_min, np.int32)
    for f in faults:
        if f.service == service:
            out[f.start_min:f.end_min] += 1
    return out
