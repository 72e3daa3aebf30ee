"""Fitting the model's service to what the store saw: slots, speed, autoscaler, warm-up.

The model's latency is queueing (M/G/c over ready replicas x concurrency slots), so the fit
chooses the slot count, the slot speed and the service-time variability whose p99 curve over
observed (traffic, ready replicas) agrees best with the observed p99: first on which steps
break the SLO (what violation minutes count), then on log p99. The autoscaler's target is
read off desired replicas against traffic; warm-up off the lag from a scale-up that free GPUs
could place to the replicas being ready.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.pool.queueing import _wait_rate, erlang_c, response_quantile

CONCURRENCY_GRID = (1, 2, 4, 8, 16, 32, 64)
CV_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
CAPACITY_POINTS = 28  # replica capacities tried per (concurrency, cv)
MAX_FIT_POINTS = 4000


@dataclass
class ServiceFit:
    """The fitted service: per-slot rate, slots per replica, cv, and how well it agrees."""

    service_rate_per_slot_rps: float
    concurrency: int
    service_cv: float
    steps_used: int
    slo_agreement: float  # share of steps where model and store agree on p99 > SLO
    log_p99_mae: float  # mean |log(model p99 / observed p99)|


def stable_p99_ms(lam: np.ndarray, replicas: np.ndarray, mu: float, conc: int, cv: float
                  ) -> np.ndarray:
    """Stable-queue p99 response (ms) per step; inf where the step is overloaded."""
    c = replicas * conc
    mu_a = np.full(lam.shape, mu)
    pw = erlang_c(c, lam / mu)
    wr = _wait_rate(c, lam, mu_a, cv)
    q = response_quantile(0.99, pw, wr, mu_a)
    q = np.where((lam >= c * mu) | (c <= 0), np.inf, q)
    return q * 1000.0


def fit_service(rps: np.ndarray, ready: np.ndarray, p99_ms: np.ndarray, slo_ms: float
                ) -> ServiceFit | None:
    """Grid search over (concurrency, cv, replica capacity); ``None`` without usable steps.

    Loss = 10 x (1 - balanced accuracy of the model's calls on breaking the SLO)
    + 5 x |model count - observed count| / observed count of steps above the SLO
    + mean of min((log model - log observed)^2, 4): violation minutes first, then the p99
    curve. Overloaded model steps count as 10x the SLO. The replica capacity is refined
    around the best point, since the SLO knee is sharp.
    """
    ok = (rps > 0) & (ready > 0) & np.isfinite(p99_ms) & (p99_ms > 0)
    if ok.sum() < 20:
        return None
    lam, rep, obs = rps[ok], ready[ok], p99_ms[ok]
    weight = np.ones(lam.size)
    if lam.size > MAX_FIT_POINTS:
        # Keep every step that breaks the SLO and a stride of the rest, weighted by the
        # stride so counts stay those of the whole period.
        over = obs > slo_ms
        rest = np.flatnonzero(~over)
        stride = max(1, rest.size // (MAX_FIT_POINTS // 2))
        kept = rest[::stride]
        keep = np.concatenate([np.flatnonzero(over), kept])
        weight = np.concatenate([np.ones(int(over.sum())),
                                 np.full(kept.size, rest.size / max(kept.size, 1))])
        lam, rep, obs = lam[keep], rep[keep], obs[keep]
    obs_over = obs > slo_ms
    n_over = float(weight[obs_over].sum())
    n_under = float(weight[~obs_over].sum())
    log_obs = np.log(obs)
    per_rep = lam / rep
    hi_load = float(np.quantile(per_rep, 0.999))
    best: tuple[float, float, int, float, float, float] | None = None

    def score(conc: int, cv: float, cap: float) -> None:
        nonlocal best
        mu = cap / conc
        m = stable_p99_ms(lam, rep, mu, conc, cv)
        m = np.where(np.isfinite(m), m, 10.0 * slo_ms)
        over = m > slo_ms
        agree = float((weight * (over == obs_over)).sum() / weight.sum())
        # Balanced: the few steps above the SLO weigh as much as all the others; and the
        # count of such steps should come out right (violation minutes are a count).
        hit = float((weight * (over & obs_over)).sum() / n_over) if n_over else 1.0
        quiet = float((weight * (~over & ~obs_over)).sum() / n_under) if n_under else 1.0
        count = abs(float((weight * over).sum()) - n_over) / max(n_over, 1.0)
        log_err = np.log(m) - log_obs
        err = float((weight * np.minimum(log_err ** 2, 4.0)).sum() / weight.sum())
        loss = 10.0 * (1.0 - 0.5 * (hit + quiet)) + 5.0 * count + err
        if best is None or loss < best[0]:
            best = (loss, mu, conc, cv, agree,
                    float((weight * np.abs(log_err)).sum() / weight.sum()))

    for conc in CONCURRENCY_GRID:
        for cv in CV_GRID:
            for cap in hi_load * np.geomspace(0.7, 6.0, CAPACITY_POINTS):
                score(conc, cv, cap)
    assert best is not None
    # Refine the replica capacity around the best: the SLO knee is sharp.
    _, mu0, conc0, cv0, _, _ = best
    for cv in CV_GRID:
        for cap in mu0 * conc0 * np.linspace(0.92, 1.08, 17):
            score(conc0, cv, cap)
    assert best is not None
    _, mu, conc, cv, agree, mae = best
    return ServiceFit(float(mu), int(conc), float(cv), int(lam.size), agree, mae)


def autoscaler_rps_per_replica(rps: np.ndarray, desired: np.ndarray) -> float | None:
    """Traffic one desired replica stands for, x, read at the autoscaler's scale-ups.

    At a scale-up the autoscaler asks for d = ceil(traffic / x), so traffic / d lies in
    ((d-1)/d x, x]; a high quantile of it over scale-ups (not at the largest count, which
    may be a cap) estimates x. The traffic is the step before (what the autoscaler saw),
    or the step itself, whichever is larger.
    """
    if rps.size < 3:
        return None
    r = np.maximum(rps[:-1], rps[1:])
    d = desired[1:]
    up = (np.diff(desired) > 0) & (d > 0) & (r > 0) & (d < np.nanmax(desired))
    if up.sum() < 5:
        ok = (d > 0) & (r > 0)
        if ok.sum() < 10:
            return None
        return float(np.quantile(r[ok] / d[ok], 0.99))
    return float(np.quantile(r[up] / d[up], 0.9))


def warmup_steps(desired: np.ndarray, ready: np.ndarray, idle_gpus: np.ndarray,
                 gpus_per_replica: float, max_steps: int = 120) -> int | None:
    """Median steps from a scale-up the idle GPUs could place at once to ready >= desired."""
    rises = np.flatnonzero((np.diff(desired) > 0) & (desired[1:] > ready[1:])) + 1
    lags = []
    for i in rises.tolist():
        need = desired[i] - ready[i]
        if idle_gpus[i - 1] + 1e-9 < need * gpus_per_replica:
            continue
        hit = np.flatnonzero(ready[i:i + max_steps + 1] >= desired[i] - 1e-9)
        if hit.size and hit[0] > 0:
            lags.append(int(hit[0]))
    return int(np.median(lags)) if lags else None
