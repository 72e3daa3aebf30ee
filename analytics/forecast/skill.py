"""How a forecast of yes-or-no and of a number is scored: Brier, reliability, coverage, error.

- The **Brier score** is the mean squared difference between the probability said and what
  happened (1 or 0): 0 is perfect, 0.25 is always saying a half. A forecast is worth having when
  it beats the baselines anyone could make without it.
- **Reliability**: the days said to collide with about p collide about p of the time; the days
  are binned by what was said, and each bin's mean probability set beside how often its days did.
- **Coverage**: the share of outcomes inside their 80% range (70-90% is an 80% range).
"""

from __future__ import annotations

from typing import Any

import numpy as np

RELIABILITY_EDGES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
RELIABILITY_MIN_DAYS = 10  # a bin with fewer days says little about its frequency
RELIABILITY_TOLERANCE = 0.15
COVERAGE_BAND = (0.70, 0.90)


def brier(p: np.ndarray, y: np.ndarray) -> float | None:
    """Mean of (p - y)^2; None for no days.

    >>> round(brier(np.array([0.9, 0.2, 0.5]), np.array([1, 0, 1])), 6)
    0.1
    """
    p, y = np.asarray(p, float), np.asarray(y, float)
    return float(np.mean((p - y) ** 2)) if p.size else None


def brier_parts(p: np.ndarray, y: np.ndarray, edges: tuple[float, ...] = RELIABILITY_EDGES) -> dict[str, float]:
    """Murphy's decomposition over the bins: ``reliability - resolution + uncertainty`` (equal to the
    Brier score when every day's probability is its bin's mean); the test's check on :func:`brier`."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    base = float(y.mean())
    rel = res = 0.0
    for a, b, n, mp, fy in _bins(p, y, edges):
        rel += n * (mp - fy) ** 2
        res += n * (fy - base) ** 2
    return {"reliability": rel / p.size, "resolution": res / p.size, "uncertainty": base * (1 - base)}


def _bins(p: np.ndarray, y: np.ndarray, edges: tuple[float, ...]):
    idx = np.clip(np.searchsorted(np.asarray(edges[1:-1]), p, side="right"), 0, len(edges) - 2)
    for k in range(len(edges) - 1):
        m = idx == k
        if m.any():
            yield edges[k], edges[k + 1], int(m.sum()), float(p[m].mean()), float(y[m].mean())


def reliability(p: np.ndarray, y: np.ndarray, edges: tuple[float, ...] = RELIABILITY_EDGES) -> list[dict[str, Any]]:
    """One row per bin with days: its edges, its days, the mean probability said and how often they
    collided, and whether that is within :data:`RELIABILITY_TOLERANCE` (judged with 10 or more days).

    >>> [r["within"] for r in reliability(np.array([0.05] * 10 + [0.95] * 10), np.array([0] * 10 + [1] * 9 + [0]))]
    [True, True]
    """
    out = []
    for a, b, n, mp, fy in _bins(np.asarray(p, float), np.asarray(y, float), edges):
        out.append({"from": a, "to": b, "days": n, "said": round(mp, 3), "collided": round(fy, 3),
                    "within": (abs(mp - fy) <= RELIABILITY_TOLERANCE) if n >= RELIABILITY_MIN_DAYS else None})
    return out


def coverage(lo: np.ndarray, hi: np.ndarray, y: np.ndarray) -> float | None:
    """The share of outcomes inside ``[lo, hi]``; None for none.

    >>> coverage(np.array([0, 0, 5]), np.array([10, 10, 6]), np.array([3, 12, 5]))
    0.6666666666666666
    """
    lo, hi, y = (np.asarray(a, float) for a in (lo, hi, y))
    return float(np.mean((y >= lo) & (y <= hi))) if y.size else None


def errors(forecast: np.ndarray, observed: np.ndarray) -> dict[str, float | None]:
    """Mean and median absolute error and the bias (forecast minus observed)."""
    f, o = np.asarray(forecast, float), np.asarray(observed, float)
    if not f.size:
        return {"mae": None, "median_abs_error": None, "bias": None}
    e = f - o
    return {"mae": float(np.mean(np.abs(e))), "median_abs_error": float(np.median(np.abs(e))),
            "bias": float(np.mean(e))}
