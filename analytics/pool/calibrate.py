"""Scenarios from the store, and the backtest that checks the model against what happened.

Both need the pool and service timelines (``analytics.timeline``), which arrive later; the
signatures are fixed now so the CLI and the pages can be written against them.
"""

from __future__ import annotations

from typing import Any

from analytics.errors import NotEnoughDataError
from analytics.pool.params import PoolScenario


def calibrate(store: Any, *, pool: str | None = None, service: str | None = None,
              start_ms: int | None = None, end_ms: int | None = None,
              step_s: int = 60) -> PoolScenario:
    """Build a ``PoolScenario`` from the store's timelines.

    What it will take from where (recorded in ``PoolScenario.provenance``, parameter ->
    source): ``traffic_rps`` from the service timeline's request rate; service rate per
    slot from requests completed per busy slot in uncontended steps; ``warmup_min`` from the
    lag between desired and ready replicas; ``concurrency`` from running requests per
    replica at saturation; ``pool.gpus`` and batch jobs (team, GPUs, start hour, duration)
    from the pool timeline's batch holdings; SLO from the user's settings. Anything the
    store lacks keeps its default and says so in ``provenance`` (``default``).

    Raises
    ------
    NotEnoughDataError
        Always, for now: the timelines this reads do not exist yet.
    """
    raise NotEnoughDataError("calibration from a store arrives with the timelines; "
                             "use --preset")


def backtest(store: Any, scenario: PoolScenario, *, observed_policy: str = "shared"
             ) -> dict[str, Any]:
    """Replay the observed period under the observed policy and compare p99 with the store.

    Needs: the service timeline's observed p99 per step (histogram_quantile semantics), the
    scenario from ``calibrate`` for the same period, and the bucket widths so the check can
    use each step's bucket as its tolerance. Will return per-step observed vs modelled p99,
    the share of steps within tolerance, and the violation minutes of each.

    Raises
    ------
    NotEnoughDataError
        Always, for now (see ``calibrate``).
    """
    raise NotEnoughDataError("the backtest needs the service timeline (observed p99 per "
                             "step), which arrives with analytics/timeline.py; use --preset")
