"""The latency model L(T, C): the p99 expected for traffic T served by C ready replicas.

Fitted on *uncontended* steps only (no batch holding the pool's GPUs, free GPUs available),
so it describes how the service behaves when it gets the capacity it asks for. The model is a
monotone curve of log p99 against log load per replica ``x = T / C``:

* inside the range seen uncontended: the median of log p99 in quantile bins of log x (a binned
  quantile regression at q = 0.5), made non-decreasing by isotonic regression (PAVA) and
  interpolated linearly between bins;
* below that range: flat at the lowest bin (an idle replica is not faster than its floor);
* above it: a straight line in log-log whose slope is a median (QuantReg, q = 0.5) regression
  over the upper half of the uncontended steps, but never less than ``overload_slope_min``
  (default 1: beyond the range it was seen in, an overloaded queue's latency grows at least in
  proportion to the load per replica).

It is monotone in load by construction, and evaluates vectorised (``np.interp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.errors import NotEnoughDataError

MIN_FIT_STEPS = 20
_FLOOR_REPLICAS = 0.5  # a service with no ready replica: load per replica is finite but huge


def load_per_replica(rps: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """Requests per second per ready replica (no replica counts as half a replica)."""
    return np.asarray(rps, float) / np.maximum(np.asarray(replicas, float), _FLOOR_REPLICAS)


@dataclass
class LatencyModel:
    """A fitted L(T, C); build it with :func:`fit_latency_model`."""

    knots_u: np.ndarray  # log load per replica at the bin centres (ascending)
    knots_y: np.ndarray  # log p99 (ms) there, non-decreasing
    slope_above: float   # d log p99 / d log x beyond the last knot
    n_fit: int

    def log_ms(self, rps: np.ndarray, replicas: np.ndarray) -> np.ndarray:
        """log L(T, C) in log-milliseconds, vectorised."""
        x = load_per_replica(rps, replicas)
        u = np.log(np.maximum(x, 1e-9))
        y = np.interp(u, self.knots_u, self.knots_y)
        over = u > self.knots_u[-1]
        y[over] = self.knots_y[-1] + self.slope_above * (u[over] - self.knots_u[-1])
        return y

    def beyond_range(self, rps: np.ndarray, replicas: np.ndarray) -> np.ndarray:
        """Steps whose load per replica is above the highest seen while fitting."""
        return load_per_replica(rps, replicas) > np.exp(self.knots_u[-1])

    def ms(self, rps: np.ndarray, replicas: np.ndarray) -> np.ndarray:
        """L(T, C) in milliseconds."""
        return np.exp(self.log_ms(rps, replicas))

    def describe(self) -> dict[str, float]:
        return {"fitted_steps": int(self.n_fit), "bins": int(self.knots_u.size),
                "load_per_replica_max_seen": float(np.exp(self.knots_u[-1])),
                "p99_ms_at_max_seen": float(np.exp(self.knots_y[-1])),
                "overload_slope": float(self.slope_above)}


def fit_latency_model(rps: np.ndarray, replicas: np.ndarray, p99_ms: np.ndarray, *,
                      overload_slope_min: float = 1.0, bins: int = 24) -> LatencyModel:
    """Fit L(T, C) on steps the caller already chose as uncontended.

    Raises
    ------
    NotEnoughDataError
        Fewer than 20 usable steps (traffic > 0, p99 known).
    """
    rps = np.asarray(rps, float)
    p99_ms = np.asarray(p99_ms, float)
    ok = np.isfinite(rps) & np.isfinite(p99_ms) & (rps > 0) & (p99_ms > 0)
    if ok.sum() < MIN_FIT_STEPS:
        raise NotEnoughDataError(
            f"only {int(ok.sum())} uncontended steps with traffic and latency; the latency model needs "
            f"{MIN_FIT_STEPS}: load a longer range or one with periods where batch held no GPUs")
    u = np.log(load_per_replica(rps, replicas)[ok])
    y = np.log(p99_ms[ok])
    order = np.argsort(u, kind="stable")
    u, y = u[order], y[order]
    n_bins = int(max(1, min(bins, u.size // 8)))
    groups = np.array_split(np.arange(u.size), n_bins)
    cu = np.array([np.median(u[g]) for g in groups])
    cy = np.array([np.median(y[g]) for g in groups])
    w = np.array([g.size for g in groups], float)
    from scipy.optimize import isotonic_regression  # scipy loads only where a model is fitted

    iso = isotonic_regression(cy, weights=w, increasing=True).x
    # Equal u centres (many identical loads) would make interp ill-defined: keep the last.
    cu, keep = np.unique(cu[::-1], return_index=True)
    iso = iso[::-1][keep]
    slope = _upper_slope(u, y)
    return LatencyModel(knots_u=cu, knots_y=np.asarray(iso, float),
                        slope_above=max(float(overload_slope_min), slope), n_fit=int(u.size))


def _upper_slope(u: np.ndarray, y: np.ndarray) -> float:
    """Median-regression slope of log p99 on log load over the upper half of the fitted steps."""
    half = u.size // 2
    uu, yy = u[half:], y[half:]
    if uu.size < 10 or np.ptp(uu) < 1e-6:
        return 0.0
    from statsmodels.regression.quantile_regression import QuantReg  # heavy import, only here
    try:
        res = QuantReg(yy, np.column_stack([np.ones_like(uu), uu])).fit(q=0.5, max_iter=2000)
        return float(res.params[1])
    except (ValueError, np.linalg.LinAlgError):
        return 0.0
