"""The forecast's minutes over the SLO as a range: the outcomes' spread, then the past's calibration.

A day's raw range is the 10th to 90th percentile of its outcomes' replayed minutes (each with its
weight) plus a past day's minutes away from the runs (a surge, a fault: drawn from the past days
of the same kind). :func:`calibrate_range` calibrates it with :class:`analytics.ranges.RangeCalibration`
when the backtest's earlier days give one (:class:`Calibrations`); the backtest scores it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analytics.measures import whole_steps_range
from analytics.ranges import RangeCalibration

RAW_QUANTILES = (0.10, 0.90)
DRAWS = 4000
FLOOR_MIN = 10.0  # a range of one value is judged at this scale (two events' worth)


def raw_range(minutes: np.ndarray, weights: np.ndarray, background: np.ndarray, step_s: int,
              *, seed: int = 0) -> tuple[float, float]:
    """The 10th-90th percentile of the outcomes' minutes (drawn by weight) plus a background day's.

    >>> raw_range(np.array([0.0, 100.0]), np.array([0.5, 0.5]), np.zeros(0), 60)
    (0.0, 100.0)
    """
    rng = np.random.default_rng(seed)
    w = np.asarray(weights, float)
    pick = rng.choice(len(minutes), size=DRAWS, p=w / w.sum())
    total = np.asarray(minutes, float)[pick]
    if len(background):
        total = total + np.asarray(background, float)[rng.integers(0, len(background), DRAWS)]
    lo, hi = np.quantile(total, RAW_QUANTILES)
    return whole_steps_range(float(lo), float(hi), step_s=step_s)


@dataclass
class Calibrations:
    """The calibrations of a backtest's earlier days, by what the range is of (``"day"``: a day's
    minutes over every service; ``"service"``: one service's)."""

    by_kind: dict[str, RangeCalibration] = field(default_factory=dict)

    def get(self, kind: str) -> RangeCalibration | None:
        return self.by_kind.get(kind)

    def describe(self) -> str:
        c = self.by_kind.get("day")
        return c.describe() if c else "not yet scored: too few earlier days to calibrate on"

    @classmethod
    def fit(cls, rows: dict[str, tuple[list[float], list[float], list[float]]]) -> "Calibrations":
        """From each kind's past raw ranges and outcomes: ``{kind: (lo, hi, observed)}``."""
        out = cls()
        for kind, (lo, hi, y) in rows.items():
            c = RangeCalibration.fit(np.array(lo), np.array(hi), np.array(y), floor=FLOOR_MIN,
                                     what="earlier days of the backtest")
            if c is not None:
                out.by_kind[kind] = c
        return out


def calibrate_range(raw: tuple[float, float], step_s: int, calibration: Any, kind: str) -> tuple[float, float]:
    """A raw range (:func:`raw_range`) calibrated by ``calibration``'s ``kind`` when it has one."""
    lo, hi = raw
    c = calibration.get(kind) if calibration is not None else None
    if c is None:
        return lo, hi
    return whole_steps_range(*c.apply(lo, hi), step_s=step_s)
