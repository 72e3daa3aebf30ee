"""The forecast's answer: how it is asked (:class:`ForecastConfig`) and what it says (a
:class:`Forecast` of :class:`DayForecast` days, each with its :class:`CollisionWindow` windows), with
their JSON (``tidelens forecast --json``, the review). :mod:`analytics.forecast.model` computes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analytics.errors import ConfigError
from analytics.forecast.frames import DAY_MS
from analytics.forecast.runs_ahead import RunAhead
from analytics.times import iso_utc


@dataclass(frozen=True)
class ForecastConfig:
    """How far ahead, on what history, with how many outcomes."""

    horizon_h: float = 36.0
    step_s: int = 60
    history_days: float = 28.0
    calibration_days: float = 7.0
    levels: int = 7
    min_history_days: float = 1.5

    def validate(self) -> "ForecastConfig":
        """The config itself; ``ConfigError`` naming the flag otherwise."""
        if not 1.0 <= self.horizon_h <= 7 * 24.0:
            raise ConfigError(f"--horizon {self.horizon_h:g} h: forecast 1 to 168 hours ahead")
        if self.step_s <= 0 or 3600 % self.step_s:
            raise ConfigError(f"--step {self.step_s} s: the what-if replays steps that divide an hour (e.g. 1m, 5m)")
        if self.levels < 1:
            raise ConfigError(f"levels={self.levels}: at least one quantile of a run's length")
        return self


@dataclass
class CollisionWindow:
    """One service's collision on one day: when, how likely, how bad, and whose runs."""

    service: str
    day: str
    start_ms: int
    end_ms: int
    earliest_ms: int
    latest_ms: int
    probability: float
    minutes_expected: float
    minutes_range: tuple[float, float] | None
    runs: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"service": self.service, "day": self.day, "start": iso_utc(self.start_ms), "end": iso_utc(self.end_ms),
                "earliest_start": iso_utc(self.earliest_ms), "latest_end": iso_utc(self.latest_ms),
                "probability": round(self.probability, 4), "minutes_expected": round(self.minutes_expected, 1),
                "minutes_range": list(self.minutes_range) if self.minutes_range else None, "runs": self.runs}


@dataclass
class DayForecast:
    """One day of the horizon (UTC): the chance any service collides, and the minutes over the SLO."""

    day: str
    start_ms: int  # the part of the day the horizon covers: (start, end]
    end_ms: int
    collision_probability: float
    minutes_expected: float
    minutes_range: tuple[float, float] | None
    minutes_by_service: dict[str, float]
    range_by_service: dict[str, tuple[float, float] | None]
    windows: list[CollisionWindow]
    outcomes: int
    raw_range: tuple[float, float] | None = None  # before the calibration: what the next one learns from
    raw_by_service: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    calibrated: bool = False  # the ranges are calibrated on the backtest's earlier days: 80% ranges
    # per outcome (weight, total minutes) and per service: what a later calibration re-reads
    draws: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def whole(self) -> bool:
        return self.end_ms - self.start_ms >= DAY_MS

    def as_json(self) -> dict[str, Any]:
        return {"day": self.day, "from": iso_utc(self.start_ms), "to": iso_utc(self.end_ms),
                "collision_probability": round(self.collision_probability, 4),
                "minutes_expected": round(self.minutes_expected, 1),
                "minutes_range": list(self.minutes_range) if self.minutes_range else None,
                "range_calibrated": self.calibrated,
                "minutes_by_service": {k: round(v, 1) for k, v in self.minutes_by_service.items()},
                "windows": [w.as_json() for w in self.windows], "outcomes": self.outcomes}


@dataclass
class Forecast:
    """A forecast made at ``at_ms`` for ``horizon_h`` hours (see the module)."""

    at_ms: int
    horizon_h: float
    step_s: int
    policy: str
    slo_ms: dict[str, float]
    days: list[DayForecast]
    runs: list[RunAhead]
    traffic: pl.DataFrame  # ts_ms, service, expected, lower, upper
    capacity: pl.DataFrame  # ts_ms, pool_gpus, others_gpus, batch_gpus, wanted_gpus
    pending_now: float | None = None
    pending_usual: float | None = None
    notes: list[str] = field(default_factory=list)
    range_basis: str = ""
    actions: list[Any] = field(default_factory=list)
    context: Any = field(default=None, repr=False)  # what the actions replay on

    def next_day(self) -> DayForecast | None:
        """The first whole day of the horizon ("tomorrow" at 18:00; today at 07:00 has the rest of it)."""
        whole = [d for d in self.days if d.whole]
        return whole[0] if whole else (self.days[-1] if self.days else None)

    def windows(self) -> list[CollisionWindow]:
        return [w for d in self.days for w in d.windows]

    def as_json(self) -> dict[str, Any]:
        return {"at": iso_utc(self.at_ms), "horizon_h": self.horizon_h, "step_s": self.step_s, "policy": self.policy,
                "slo_ms": self.slo_ms, "days": [d.as_json() for d in self.days],
                "windows": [w.as_json() for w in self.windows()],
                "runs": [{"workload": r.workload, "team": r.team, "gpus": r.gpus, "probability": round(r.probability, 4),
                          "running": r.running, "start": iso_utc(r.start_ms),
                          "end_range": [iso_utc(r.ends_ms[0]), iso_utc(r.ends_ms[-1])],
                          "end_median": iso_utc(r.ends_ms[len(r.ends_ms) // 2]), "basis": r.basis} for r in self.runs],
                "kueue": {"pending_now": self.pending_now, "pending_usual": self.pending_usual},
                "actions": [a.as_json() for a in self.actions], "range_basis": self.range_basis, "notes": self.notes}
