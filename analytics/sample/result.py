"""One simulated run as the rest of the simulator reads it: :class:`SimResult` (the scenario,
the full run, its counterfactual re-runs and the truth's events) and :class:`Variant` (one run of
the pool under a set of removals); :func:`analytics.sample.sim.simulate` makes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analytics.sample.cluster import ScenarioConfig, Topology
from analytics.sample.faults import Fault
from analytics.sample.latency import LatencyDraws
from analytics.sample.pool import Pod, PoolRun
from analytics.sample.traffic import MIN_PER_DAY, Surge


@dataclass
class Variant:
    """One run of the pool under a set of removals."""

    pool: PoolRun
    rate_rps: dict[str, np.ndarray]
    requests: dict[str, np.ndarray]
    latency: dict[str, LatencyDraws]


@dataclass
class SimResult:
    """A simulated run: the scenario, the full run, its counterfactuals, and the truth."""

    scenario: ScenarioConfig
    days: int
    gpus: int
    seed: int
    start_ms: int
    topology: Topology
    full: Variant
    surges: list[Surge]
    p99_variants: dict[str, dict[str, np.ndarray]]  # counterfactual run (full, no_batch...) -> service -> per-minute p99 ms
    events: list[dict[str, Any]] = field(default_factory=list)
    dev_pods: list[Pod] = field(default_factory=list)
    variants: tuple[str, ...] = ()  # export variants, canonical order (analytics.sample.variants)
    faults: list[Fault] = field(default_factory=list)  # degraded replicas (the same in every run)

    @property
    def n_min(self) -> int:
        return self.days * MIN_PER_DAY

    def ts_ms(self) -> np.ndarray:
        """Timestamp of each minute's scrape (the end of the minute's step), epoch ms."""
        return self.start_ms + np.arange(self.n_min, dtype=np.int64) * self.scenario.scrape_s * 1000
