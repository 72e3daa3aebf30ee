"""Request latency drawn from the state of each service's queue, minute by minute.

Each minute a service has ``R`` serving replicas of ``concurrency`` slots each (servers
``c = R * concurrency``), a slot held ``hold_s`` on average. While the queue is stable a request
waits with the Erlang-C probability and then for an exponential time (M/M/c); when arrivals
exceed what the slots complete, a backlog is carried from minute to minute (clients abandon
after ``patience_s``) and requests wait for it to drain. The measured phase (prefill for LLM
TTFT, the whole request for http) is log-normal and slows as slots fill (continuous batching
shares the GPU). Each minute draws ``K`` latencies (one per small batch of the minute's
requests) from fixed uniforms, so counterfactual runs see the same randomness.

**The exported requests are the draws, scaled.** A minute with ``N`` requests exports each of its
``K`` draws ``N // K`` times, and the first ``N % K`` draws once more (:func:`request_weights`: a
largest-remainder apportionment of ``N`` over equally likely draws, with no further randomness).
The true p99 is the empirical 0.99-quantile of exactly those ``N`` requests (the smallest value
with at least ``0.99 * N`` requests at or below it), and the exporter's bucket counts are the
same requests counted per bucket, so "true p99 > SLO" is "more than 1% of the exported requests
above the SLO" whenever the SLO is a bucket bound.

This is the simulator's ground truth; the analyses model latency with their own code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analytics.errors import ConfigError
from analytics.measures import weighted_quantile_rows
from analytics.sample.cluster import ServiceConfig

DRAWS_PER_MIN = 200


@dataclass
class LatencyDraws:
    """Per-minute draws of one service and the queue state behind them."""

    main_s: np.ndarray  # (T, K) TTFT (vllm) or request duration (http), seconds
    e2e_s: np.ndarray | None  # (T, K) vllm end-to-end latency, seconds
    p99_ms: np.ndarray  # (T,) the minute's true p99 of the SLO's latency (main_s or e2e_s), ms (nan without requests)
    rho: np.ndarray  # (T,) offered load per slot capacity
    running: np.ndarray  # (T,) requests in service per serving replica
    waiting: np.ndarray  # (T,) requests waiting per serving replica


@dataclass
class Uniforms:
    """The fixed randomness of one service's latency (common to all counterfactual runs)."""

    wait_u: np.ndarray
    wait_e: np.ndarray
    pos_u: np.ndarray
    z1: np.ndarray
    z2: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, n_min: int, k: int = DRAWS_PER_MIN) -> "Uniforms":
        shape = (n_min, k)
        return cls(rng.random(shape, dtype=np.float32), rng.standard_exponential(shape, dtype=np.float32),
                   rng.random(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32),
                   rng.standard_normal(shape, dtype=np.float32))


def erlang_c(servers: np.ndarray, offered: np.ndarray) -> np.ndarray:
    """Probability of waiting in M/M/c (1 where unstable)."""
    c = np.maximum(servers, 1)
    b = stats.poisson.pmf(c, offered) / np.maximum(stats.poisson.cdf(c, offered), 1e-300)
    rho = offered / c
    out = b / np.maximum(1.0 - rho * (1.0 - b), 1e-12)
    return np.where(rho < 1.0, np.clip(out, 0.0, 1.0), 1.0)


def backlog(lam_rps: np.ndarray, cap_rps: np.ndarray, patience_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Requests queued beyond steady state at the start and end of each minute."""
    n = len(lam_rps)
    start = np.zeros(n)
    end = np.zeros(n)
    b = 0.0
    lam_l = lam_rps.tolist()
    cap_l = cap_rps.tolist()
    for t in range(n):
        start[t] = b
        lam, cap = lam_l[t], cap_l[t]
        if b > 0.0 or lam > cap:
            b = min(max(0.0, b + (lam - cap) * 60.0), lam * patience_s)
        end[t] = b
    return start, end


def draw_latency(svc: ServiceConfig, n_req: np.ndarray, serving: np.ndarray, u: Uniforms,
                 degraded: np.ndarray | None = None, fault_slowdown: float = 1.0) -> LatencyDraws:
    """Latency draws of one service given requests and serving replicas per minute.

    ``degraded`` (per minute, optional) counts serving replicas that answer ``fault_slowdown`` x
    slower (:mod:`analytics.sample.faults`): the draws ``k`` with ``k mod R`` below it (a share
    ``degraded / R`` of the minute's requests, ``R`` serving replicas) take that much longer in
    their measured phase.
    """
    lam = n_req / 60.0
    servers = np.maximum(serving, 1) * svc.concurrency
    mu = 1.0 / svc.hold_s
    offered = lam / mu
    rho = offered / servers
    occ = np.minimum(rho, 1.0)
    pw = erlang_c(servers, offered)
    drain = np.maximum(servers * mu - lam, 0.02 * servers * mu)
    b0, b1 = backlog(lam, servers * mu, svc.patience_s)
    col = (slice(None), None)
    wait = np.where(u.wait_u < pw[col], u.wait_e / drain[col], 0.0)
    wait = wait + (b0[col] + (b1 - b0)[col] * u.pos_u) / (servers * mu)[col]
    slow = 1.0 + svc.slowdown * occ ** 4
    served = np.exp(np.log(svc.service_median_s) + svc.service_sigma * u.z1) * slow[col]
    if degraded is not None and np.any(degraded > 0):
        r = np.maximum(serving, 1)
        hit = (np.arange(served.shape[1])[None, :] % r[:, None]) < np.minimum(degraded, r)[:, None]
        served = np.where(hit, served * fault_slowdown, served)
    main = wait + served
    main = main.astype(np.float32)
    e2e = None
    if svc.kind == "vllm":
        decode_slow = 1.0 + 0.5 * occ
        if svc.decode_slowdown:  # (the default's arithmetic untouched: its output stays bit for bit)
            decode_slow = decode_slow + svc.decode_slowdown * occ ** 4
        decode = np.exp(np.log(svc.decode_median_s) + svc.decode_sigma * u.z2) * decode_slow[col]
        e2e = (main + decode).astype(np.float32)
    if svc.slo_latency not in ("main", "e2e") or (svc.slo_latency == "e2e" and e2e is None):
        raise ConfigError(f"service {svc.name}: slo_latency {svc.slo_latency!r}; use 'main', or 'e2e' for a vllm service")
    # the truth's p99 is on the latency the SLO is on (what an SLO check of this service reads)
    slo_draws = e2e if svc.slo_latency == "e2e" else main
    p99 = weighted_p99(slo_draws, request_weights(n_req, main.shape[1])) * 1000.0
    p99 = np.where(n_req > 0, p99, np.nan)
    per_rep = np.maximum(serving, 1)
    running = np.minimum(svc.concurrency, lam * svc.hold_s / per_rep)
    mean_wait = np.where(rho < 1.0, pw / drain, 0.0)
    waiting = (lam * mean_wait + (b0 + b1) / 2.0) / per_rep
    return LatencyDraws(main_s=main, e2e_s=e2e, p99_ms=p99, rho=rho, running=running, waiting=waiting)


def request_weights(n_req: np.ndarray, k: int) -> np.ndarray:
    """How many exported requests each of a minute's ``k`` draws stands for, shape ``(T, k)``.

    ``n // k`` each and one more for the first ``n % k`` draws: each row sums to the minute's
    requests exactly. The draws are exchangeable, so giving the remainder to the first ones
    biases nothing and needs no extra randomness.
    """
    n = np.maximum(np.asarray(n_req, dtype=np.int64), 0)
    base = (n // k)[:, None]
    extra = (np.arange(k)[None, :] < (n % k)[:, None]).astype(np.int64)
    return base + extra


def weighted_p99(draws: np.ndarray, weights: np.ndarray, q: float = 0.99) -> np.ndarray:
    """Per row (minute), the p99 of the weighted requests' draws: the one weighted percentile,
    :func:`analytics.measures.weighted_quantile_rows`; nan for rows without requests."""
    return weighted_quantile_rows(draws, weights, q)


def bucket_counts(draws: np.ndarray, weights: np.ndarray, bounds_s: tuple[float, ...]) -> np.ndarray:
    """Exported requests per bucket ``le`` bound and minute, ``(T, len(bounds) + 1)`` (last: above all)."""
    nb = len(bounds_s) + 1
    idx = np.searchsorted(np.asarray(bounds_s), draws, side="left")
    rows = np.repeat(np.arange(draws.shape[0]), draws.shape[1])
    counts = np.bincount(rows * nb + idx.ravel(), weights=weights.ravel().astype(np.float64),
                         minlength=draws.shape[0] * nb).reshape(-1, nb)
    return np.rint(counts).astype(np.int64)
