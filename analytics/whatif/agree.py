"""The one sentence the What-if, Tail events and review pages must agree on.

"Tail events attribute N minutes of this range on these services to batch contention;
partitioned with R reserved GPUs removes M of the shared minutes." N comes from the tail events
(each event's minutes over the SLO weighted by its batch-contention share, over the modelled
period); M is the shared row's minutes over the SLO less the partitioned row's, both replays of
the runs that happened. When the model and the attribution tell the same story, M is close to N.
For a pool (:func:`pool_agreement`), both are summed over its services, as its answer's minutes
are (:mod:`analytics.whatif.answer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol

import numpy as np
import polars as pl

from analytics.measures import minutes_over_slo
from analytics.times import step_start_ms
from analytics.whatif.answer import PoolAnswer, in_words
from analytics.whatif.outputs import PolicyResult, compare
from analytics.whatif.params import PoolScenario
from analytics.whatif.policies import reservation

BATCH = "batch_contention"


class TailEvents(Protocol):
    """What the agreement reads of a tail-events analysis (:class:`analytics.events.EventsAnalysis`):
    its events, its per-step frame and their step."""

    events: list[Any]
    steps: pl.DataFrame

    @property
    def step_s(self) -> int: ...


def batch_contention_minutes(events: Iterable[Any], steps: pl.DataFrame | None = None, *,
                             step_s: int = 0, service: str | None = None,
                             start_ms: int | None = None, end_ms: int | None = None) -> float:
    """Minutes of tail events attributed to batch contention: each event's minutes over the SLO
    (the steps of ``steps`` inside it whose p99 is over the event's SLO,
    :func:`analytics.measures.minutes_over_slo`; without ``steps``, its whole length) times its
    batch-contention share, summed over the events (the part of each in ``(start_ms, end_ms]``).

    ``events`` are :class:`analytics.events.Event` (``service``, ``start_ms``, ``end_ms``,
    ``slo_ms``, ``shares``), ``steps`` the analysis' per-step frame
    (``EventsAnalysis.steps``: ``ts_ms``, ``service``, ``p99_ms``, steps ending at ``ts_ms``)
    and ``step_s`` their length (``EventsAnalysis.cfg.step_s``); ``service`` keeps one
    service's events.

    >>> from analytics.events import Event
    >>> ev = Event("ev-1", "chat", "p", 0, 600_000, 900.0, 500.0, shares={BATCH: 0.75})
    >>> batch_contention_minutes([ev]), batch_contention_minutes([ev], start_ms=300_000)
    (7.5, 3.75)
    >>> steps = pl.DataFrame({"ts_ms": [60_000 * k for k in range(1, 11)], "service": ["chat"] * 10,
    ...                       "p99_ms": [900.0] * 4 + [100.0] * 2 + [800.0] * 4})
    >>> batch_contention_minutes([ev], steps, step_s=60)
    6.0
    """
    if steps is not None and step_s <= 0:
        raise ValueError("batch_contention_minutes: give the steps' length (step_s) with the steps")

    by_service: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    total = 0.0
    for ev in events:
        if service is not None and ev.service != service:
            continue
        a = ev.start_ms if start_ms is None else max(ev.start_ms, start_ms)
        b = ev.end_ms if end_ms is None else min(ev.end_ms, end_ms)
        share = float(ev.shares.get(BATCH, 0.0))
        if b <= a or share <= 0:
            continue
        if steps is None:
            total += (b - a) / 60_000.0 * share
            continue
        if ev.service not in by_service:
            mine = steps.filter(pl.col("service") == ev.service).sort("ts_ms")
            ts = mine["ts_ms"].cast(pl.Int64).to_numpy()
            p99 = mine["p99_ms"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
            by_service[ev.service] = (ts, p99)
        ts, p99 = by_service[ev.service]
        i, j = np.searchsorted(ts, a, side="right"), np.searchsorted(ts, b, side="right")
        if j > i:
            total += minutes_over_slo(p99[i:j], ev.slo_ms, step_s=step_s) * share
    return total


@dataclass(frozen=True)
class Agreement:
    """N against M for one scenario (see the module)."""

    service: str
    tail_batch_minutes: float  # N
    events: int  # tail events of the service in the period
    shared_minutes: float
    partitioned_minutes: float
    reserved_gpus: int
    period_days: float

    @property
    def removed_minutes(self) -> float:
        """M: the shared minutes partitioning removes (negative when it adds)."""
        return self.shared_minutes - self.partitioned_minutes

    @property
    def agrees(self) -> bool:
        """M within 25% or 15 minutes of N (whichever is larger)."""
        n, m = self.tail_batch_minutes, self.removed_minutes
        return abs(m - n) <= max(0.25 * n, 15.0)

    def sentence(self) -> str:
        days = f"{self.period_days:.0f} day{'s' if round(self.period_days) != 1 else ''}"
        return (f"Tail events attribute {self.tail_batch_minutes:,.0f} minutes over the SLO of these {days} "
                f"on {self.service} to batch contention; partitioned with {self.reserved_gpus} reserved GPUs "
                f"removes {self.removed_minutes:,.0f} of the shared pool's {self.shared_minutes:,.0f}, modelled.")

    def as_dict(self) -> dict[str, Any]:
        return {"service": self.service, "tail_batch_minutes": self.tail_batch_minutes,
                "events": self.events, "shared_minutes": self.shared_minutes,
                "partitioned_minutes": self.partitioned_minutes,
                "removed_minutes": self.removed_minutes, "reserved_gpus": self.reserved_gpus,
                "agrees": self.agrees, "sentence": self.sentence()}


def agreement(found: TailEvents, scn: PoolScenario,
              results: dict[str, PolicyResult] | None = None) -> Agreement:
    """N (:func:`batch_contention_minutes` over ``scn``'s period, on the events analysis
    ``found``'s steps) beside M (shared less partitioned on ``scn``), for the service ``scn`` was
    calibrated on (``store:<service>``).

    ``results`` are the policy table's replays when it has them (``compare``); the shared and
    partitioned rows missing from it are replayed here.
    """
    service = scn.modelled_service() if scn.name.startswith("store:") else None
    have = dict(results or {})
    missing = tuple(p for p in ("shared", "partitioned") if p not in have)
    if missing:
        have.update(compare(scn, missing))
    ts = scn.ts_ms()
    start, end = step_start_ms(int(ts[0]), scn.step_s * 1000), int(ts[-1])
    mine = [e for e in found.events if (service is None or e.service == service)
            and e.end_ms > start and e.start_ms < end]
    minutes = batch_contention_minutes(mine, found.steps, step_s=found.step_s, start_ms=start, end_ms=end)
    return Agreement(service=service or scn.name, tail_batch_minutes=minutes,
                     events=len(mine), shared_minutes=float(have["shared"].summary.violation_minutes),
                     partitioned_minutes=float(have["partitioned"].summary.violation_minutes),
                     reserved_gpus=reservation(scn)[0], period_days=scn.steps * scn.step_s / 86400.0)


def pool_agreement(found: TailEvents, answer: PoolAnswer) -> Agreement:
    """:func:`agreement` over every service of the pool's answer, summed: N over the services'
    events, M the pool's shared minutes less its partitioned ones (each service against its
    own SLO), R the services' reservations together."""
    parts = [agreement(found, r.scenario, r.results) for r in answer.replays]
    return Agreement(service=in_words(answer.services), tail_batch_minutes=sum(a.tail_batch_minutes for a in parts),
                     events=sum(a.events for a in parts),
                     shared_minutes=sum(a.shared_minutes for a in parts),
                     partitioned_minutes=sum(a.partitioned_minutes for a in parts),
                     reserved_gpus=sum(a.reserved_gpus for a in parts), period_days=answer.period_days)
