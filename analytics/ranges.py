"""What makes a range an 80% range: calibrated on the store's own past, scored, and saying so.

A model's spread (the outcomes it can think of) is narrower than what happens: it does not know
the surge it cannot see, nor its own error. :class:`RangeCalibration` widens (or narrows) a raw
range by the past: split conformal prediction on scaled scores (conformalized quantile
regression, Romano, Patterson and Candes 2019): for each past range ``[lo, hi]`` and what
happened ``y``, the score ``max(lo - y, y - hi) / width``; the calibrated range of a new raw
range is ``[lo - q width, hi + q width]`` with ``q`` the ``ceil((n + 1) coverage)``-th smallest
of the ``n`` past scores, which covers at least ``coverage`` of exchangeable outcomes. ``width``
is the raw range's, at least ``floor`` (a range of one value still has a scale).

The forecast calibrates its minutes on its own backtest's earlier days; ``tidelens change
compare`` calibrates its range on the before-period's own days (each judged against the others).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COVERAGE = 0.8
MIN_PAST = 4  # fewer past ranges cannot place the 80% quantile of their scores


def conformal_scores(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, floor: float) -> np.ndarray:
    """Each past range's score: how far outside it the outcome fell, in widths (negative: inside).

    >>> conformal_scores(np.array([0.0, 10.0]), np.array([10.0, 20.0]), np.array([15.0, 15.0]), 1.0).tolist()
    [0.5, -0.5]
    """
    lo, hi, y = (np.asarray(a, float) for a in (lo, hi, y))
    return np.maximum(lo - y, y - hi) / np.maximum(hi - lo, floor)


@dataclass(frozen=True)
class RangeCalibration:
    """How much to widen a raw range (``q`` widths each side), learned from ``n`` past ranges."""

    q: float
    n: int
    floor: float
    coverage: float = COVERAGE
    what: str = "past ranges"

    @classmethod
    def fit(cls, lo: np.ndarray, hi: np.ndarray, y: np.ndarray, *, floor: float, coverage: float = COVERAGE,
            what: str = "past ranges") -> "RangeCalibration | None":
        """The calibration of past raw ranges against their outcomes; None with fewer than
        :data:`MIN_PAST` of them.

        >>> c = RangeCalibration.fit(np.zeros(9), np.ones(9), np.arange(9.0), floor=1.0)
        >>> c.q, c.apply(0.0, 1.0)
        (6.0, (0.0, 7.0))
        """
        s = conformal_scores(lo, hi, y, floor)
        s = np.sort(s[np.isfinite(s)])
        if s.size < MIN_PAST:
            return None
        rank = math.ceil((s.size + 1) * coverage)
        q = float(s[min(rank, s.size) - 1]) if rank <= s.size else float(s[-1])
        return cls(q, int(s.size), float(floor), coverage, what)

    def apply(self, lo: float, hi: float, *, lower_bound: float = 0.0) -> tuple[float, float]:
        """The calibrated range of a raw ``[lo, hi]`` (never below ``lower_bound``)."""
        w = max(hi - lo, self.floor)
        a, b = lo - self.q * w, hi + self.q * w
        if a > b:  # narrowed past its middle: the middle
            a = b = (lo + hi) / 2.0
        return max(lower_bound, a), max(lower_bound, b)

    def describe(self) -> str:
        return (f"calibrated on {self.n} {self.what}: widened by {self.q:+.2f} of its width each side so that "
                f"{self.coverage:.0%} of them would have been inside (split conformal)")
