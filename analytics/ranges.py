"""What makes a range an 80% range: calibrated on the store's own past, scored, and saying so.

A model's spread (the outcomes it can think of) is narrower than what happens: it does not know
the surge it cannot see, nor its own error. :class:`RangeCalibration` widens (or narrows) a raw
range by the past: split conformal prediction on scaled scores, each tail apart (conformalized
quantile regression, Romano, Patterson and Candes 2019, its asymmetric form): for each past range
``[lo, hi]`` and what happened ``y``, how far below it ``(lo - y) / width`` and how far above it
``(y - hi) / width``; a new raw range becomes ``[lo - q_lo width, hi + q_hi width]``, each ``q``
the ``ceil((n + 1) (1 + coverage) / 2)``-th smallest of the ``n`` past scores of its tail, so that
at most half of the misses are allowed on each side and at least ``coverage`` of exchangeable
outcomes fall inside. ``width`` is the raw range's, at least ``floor`` (a range of one value still
has a scale). The tails are apart because they differ: a forecast's minutes over the SLO have a
mass at zero below (the night the run does not start) and a long tail above (a surge).

With ``tails="together"`` one score, the larger of the two, is taken at ``coverage`` itself
(the symmetric form: rank ``ceil((n + 1) coverage)``) and both edges move by it. It asks less of
few past ranges: with 16 of them the rule above needs the 90th percentile of each tail, the
largest score, where the symmetric form reads the 14th.

The forecast calibrates its minutes on its own backtest's earlier days, each tail apart;
``tidelens change compare`` calibrates its range on the project's own changes, its tails together
(32 rows of the change bench; a store has none to calibrate on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COVERAGE = 0.8
MIN_PAST = 4  # fewer past ranges cannot place the quantiles of their scores


def tail_scores(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Each past range's scores: how far below it and how far above it the outcome fell, in widths
    (negative: inside, on that side).

    >>> [s.tolist() for s in tail_scores(np.array([0.0, 10.0]), np.array([10.0, 20.0]), np.array([15.0, 15.0]), 1.0)]
    [[-1.5, -0.5], [0.5, -0.5]]
    """
    lo, hi, y = (np.asarray(a, float) for a in (lo, hi, y))
    w = np.maximum(hi - lo, floor)
    return (lo - y) / w, (y - hi) / w


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The ``ceil((n + 1) level)``-th smallest score (the largest when that rank passes ``n``)."""
    s = np.sort(np.asarray(scores, float))
    return float(s[min(math.ceil((s.size + 1) * level), s.size) - 1])


@dataclass(frozen=True)
class RangeCalibration:
    """How much to widen a raw range below and above (``q_lo``, ``q_hi`` widths), learned from ``n``
    past ranges."""

    q_lo: float
    q_hi: float
    n: int
    floor: float
    coverage: float = COVERAGE
    what: str = "past ranges"
    tails: str = "apart"

    @classmethod
    def fit(cls, lo: np.ndarray, hi: np.ndarray, y: np.ndarray, *, floor: float, coverage: float = COVERAGE,
            what: str = "past ranges", tails: str = "apart") -> "RangeCalibration | None":
        """The calibration of past raw ranges against their outcomes, each tail apart or (``tails=
        "together"``) by one score; None with fewer than :data:`MIN_PAST` of them.

        >>> c = RangeCalibration.fit(np.zeros(9), np.ones(9), np.arange(9.0), floor=1.0)
        >>> c.q_lo, c.q_hi, c.apply(0.0, 1.0)
        (0.0, 7.0, (0.0, 8.0))
        >>> t = RangeCalibration.fit(np.zeros(9), np.ones(9), np.arange(9.0), floor=1.0, tails="together")
        >>> t.q_lo, t.q_hi, t.apply(0.0, 1.0)
        (6.0, 6.0, (0.0, 7.0))
        """
        below, above = tail_scores(lo, hi, y, floor)
        keep = np.isfinite(below) & np.isfinite(above)
        if int(keep.sum()) < MIN_PAST:
            return None
        if tails == "together":
            q = conformal_quantile(np.maximum(below[keep], above[keep]), coverage)
            return cls(q, q, int(keep.sum()), float(floor), coverage, what, tails)
        if tails != "apart":
            raise ValueError(f"tails={tails!r}: 'apart' or 'together'")
        level = (1.0 + coverage) / 2.0
        return cls(conformal_quantile(below[keep], level), conformal_quantile(above[keep], level), int(keep.sum()),
                   float(floor), coverage, what, tails)

    def apply(self, lo: float, hi: float, *, lower_bound: float = 0.0) -> tuple[float, float]:
        """The calibrated range of a raw ``[lo, hi]`` (never below ``lower_bound``)."""
        w = max(hi - lo, self.floor)
        a, b = lo - self.q_lo * w, hi + self.q_hi * w
        if a > b:  # narrowed past itself: where the two edges crossed
            a = b = (a + b) / 2.0
        return max(lower_bound, a), max(lower_bound, b)

    def describe(self) -> str:
        rest = ("at most half of the rest on either side" if self.tails == "apart"
                else "the rest on either side")
        return (f"calibrated on {self.n} {self.what}: its lower edge moved by {-self.q_lo:+.2f} of its width and "
                f"its upper by {self.q_hi:+.2f}, so that {self.coverage:.0%} of them would have been inside, {rest} "
                "(split conformal)")
