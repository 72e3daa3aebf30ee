"""The service fit recovers the parameters of a service whose p99 the model itself made."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.measures import over_slo_chance
from analytics.whatif.fit import (MAX_FIT_POINTS, fit_service, patience_candidates, replica_cap,
                                  stable_p99_parts, weighted_p99)
from analytics.whatif.queueing import busy_growth, step_latency

# A time-to-first-token service: 16 slots of a 4 s hold (4 req/s a replica), 250 ms of
# prefill that grows 5x at full slots, clients that give up after 20 s.
TRUTH = {"conc": 16, "mu": 0.25, "cv": 1.0, "floor_ms": 250.0, "slowdown": 4.0,
         "timeout_s": 20.0}


def _observed(seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 2 * 1440
    minute = np.arange(n) % 1440
    rps = 8.0 + 30.0 * np.clip(np.sin(np.pi * (minute - 360) / 900.0), 0, None)
    rps *= np.exp(rng.normal(0.0, 0.05, n))
    ready = np.maximum(3.0, np.ceil(rps / (4.0 * 0.55)))
    # Mornings short of replicas (a batch job holds the GPUs), and one surge past capacity.
    short = (minute >= 540) & (minute < 620)
    ready[short] = np.maximum(3.0, np.floor(rps[short] / 3.6))
    rps[1440 + 900:1440 + 915] *= 2.2
    lat = step_latency(rps, ready * TRUTH["conc"], TRUTH["mu"], step_s=60.0, slo_s=1.0,
                       timeout_s=TRUTH["timeout_s"], cv=TRUTH["cv"],
                       floor_s=TRUTH["floor_ms"] / 1000.0, busy_slowdown=TRUTH["slowdown"],
                       service_in_latency=False)
    p99 = lat.p99_s * 1000.0 * np.exp(rng.normal(0.0, 0.03, n))
    return rps, ready, p99


@pytest.fixture(scope="module")
def fitted():
    rps, ready, p99 = _observed()
    return fit_service(rps, ready, p99, 1000.0, timeouts_s=patience_candidates(p99, 1000.0)), \
        (rps, ready, p99)


def test_fit_recovers_a_first_token_service(fitted) -> None:
    fit, _ = fitted
    assert fit is not None
    assert not fit.service_in_latency  # the 4 s hold is not in the latency
    cap = fit.service_rate_per_slot_rps * fit.concurrency
    # Slots, cv and slowdown trade against each other (several shapes draw nearly the same
    # p99 curve); capacity, the floor and the patience are what the data pins down.
    assert cap == pytest.approx(TRUTH["conc"] * TRUTH["mu"], rel=0.15)
    assert fit.latency_floor_ms == pytest.approx(TRUTH["floor_ms"], rel=0.3)
    assert fit.timeout_s == pytest.approx(TRUTH["timeout_s"], rel=0.15)
    assert fit.slo_agreement > 0.98


def test_fitted_replay_reproduces_p99(fitted) -> None:
    fit, (rps, ready, p99) = fitted
    lat = step_latency(rps, ready * fit.concurrency, fit.service_rate_per_slot_rps,
                       step_s=60.0, slo_s=1.0, timeout_s=fit.timeout_s, cv=fit.service_cv,
                       floor_s=fit.latency_floor_ms / 1000.0, busy_slowdown=fit.busy_slowdown,
                       service_in_latency=fit.service_in_latency)
    w = rps * 60.0
    model = lat.p99_s * 1000.0
    assert weighted_p99(model, w) == pytest.approx(weighted_p99(p99, w), rel=0.10)
    assert np.median(model / p99) == pytest.approx(1.0, abs=0.1)


def stable_p99_ms(lam, replicas, mu, conc, cv, floor_ms=0.0, busy_slowdown=0.0):
    """Stable-queue p99 (ms) per step with the whole hold in the latency, floor included."""
    q, shift = stable_p99_parts(lam, replicas, mu, conc, cv, True)
    grow = busy_growth(busy_slowdown, lam / np.maximum(replicas * conc * mu, 1e-300))
    return q + (shift + floor_ms) * grow


def test_exponential_service_in_the_latency_cannot_fit_it(fitted) -> None:
    """What the fit had before: the slot's whole hold in the latency, no floor."""
    _, (rps, ready, p99) = fitted
    quiet = rps / ready < np.median(rps / ready)
    best = min(float(np.median(np.abs(np.log(stable_p99_ms(rps, ready, cap / c, c, 1.0)[quiet]
                                              / p99[quiet]))))
               for c in (1, 4, 16) for cap in (4.0, 6.0, 10.0))
    assert best > 0.3  # normal hours off by a third or more


def test_replica_cap_needs_traffic_asking_for_more() -> None:
    desired = np.array([2, 3, 5, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6, 4], dtype=float)
    wanting = np.array([1, 3, 5, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 6, 4], dtype=float)
    assert replica_cap(wanting, desired, 1.0, min_steps=5) == 8
    assert replica_cap(desired, desired, 1.0, min_steps=5) is None  # never wanted more
    assert replica_cap(wanting, desired, None) is None


def test_patience_candidates_start_at_the_plateau_median() -> None:
    p99 = np.concatenate([np.full(50, 80.0), np.full(10, 2500.0), np.linspace(3000, 5000, 9)])
    cands = patience_candidates(p99, 120.0)
    assert cands[0] == 2.5 and max(cands) >= 4.0 and len(set(cands)) == len(cands)
    assert patience_candidates(np.full(10, 50.0), 120.0) == ()


def test_an_slo_below_the_usual_p99_keeps_the_grid_bounded() -> None:
    # Six days, every step above a 100 ms SLO: the grid sees a bounded stride of them, weighted
    # back to the whole period, and still finds the service's capacity.
    rps, ready, p99 = (np.tile(a, 3) for a in _observed(seed=9))

    fit = fit_service(rps, ready, p99, 100.0)
    assert fit is not None
    assert rps.size > 2 * MAX_FIT_POINTS and fit.steps_used <= MAX_FIT_POINTS + 2
    assert fit.service_rate_per_slot_rps * fit.concurrency == pytest.approx(
        TRUTH["conc"] * TRUTH["mu"], rel=0.3)


def _hovering(reading_sd: float, seed: int = 3) -> tuple[np.ndarray, ...]:
    """Two days of the first-token service with an afternoon each day held at its SLO by an
    autoscaler at its maximum (replicas fixed, traffic just at the knee), read by an exporter
    whose p99 scatters ``reading_sd`` (log) around the true one."""
    rps, ready, _ = _observed(seed)
    minute = np.arange(rps.size) % 1440
    rng = np.random.default_rng(seed + 1)
    hover = (minute >= 840) & (minute < 960)
    ready[hover] = 6.0
    rps[hover] = 6.0 * 3.27 * np.exp(rng.normal(0.0, 0.01, int(hover.sum())))
    lat = step_latency(rps, ready * TRUTH["conc"], TRUTH["mu"], step_s=60.0, slo_s=1.0,
                       timeout_s=TRUTH["timeout_s"], cv=TRUTH["cv"],
                       floor_s=TRUTH["floor_ms"] / 1000.0, busy_slowdown=TRUTH["slowdown"],
                       service_in_latency=False)
    true_ms = lat.p99_s * 1000.0
    read = true_ms * np.exp(rng.normal(0.0, reading_sd, rps.size))
    return rps, ready, true_ms, read, hover


def test_the_fit_counts_steps_over_the_slo_as_the_store_read_them() -> None:
    """An afternoon held at the SLO reads over on some steps and under on others: the fit
    finds that scatter, and its model's expected count of steps over the SLO is the store's;
    read without noise, the same story carries none and the calls count as they are."""
    rps, ready, true_ms, read, hover = _hovering(0.12)
    assert 0.9 < float(np.median(true_ms[hover])) / 1000.0 < 1.1  # the afternoon sits at the SLO
    observed = read > 1000.0
    assert 0.3 * hover.sum() < observed[hover].sum() < 0.7 * hover.sum()  # some of it reads over
    fit = fit_service(rps, ready, read, 1000.0, timeouts_s=patience_candidates(read, 1000.0))
    assert fit is not None
    # The scatter of the readings around the fitted curve: the exporter's 0.12 and whatever
    # the curve misses of the truth.
    assert fit.p99_noise_log_sd >= 0.06
    chance = over_slo_chance(_replayed_ms(fit, rps, ready), 1000.0, fit.p99_noise_log_sd)
    assert chance.sum() == pytest.approx(observed.sum(), rel=0.1)
    assert chance[hover].sum() == pytest.approx(observed[hover].sum(), rel=0.15)

    rps, ready, true_ms, read, hover = _hovering(0.0)
    fit = fit_service(rps, ready, read, 1000.0, timeouts_s=patience_candidates(read, 1000.0))
    assert fit is not None and fit.p99_noise_log_sd == 0.0
    calls = _replayed_ms(fit, rps, ready) > 1000.0
    assert calls.sum() == pytest.approx((read > 1000.0).sum(), rel=0.1)


def _replayed_ms(fit, rps: np.ndarray, ready: np.ndarray) -> np.ndarray:
    lat = step_latency(rps, ready * fit.concurrency, fit.service_rate_per_slot_rps, step_s=60.0,
                       slo_s=1.0, timeout_s=fit.timeout_s, cv=fit.service_cv,
                       floor_s=fit.latency_floor_ms / 1000.0, busy_slowdown=fit.busy_slowdown,
                       service_in_latency=fit.service_in_latency)
    return lat.p99_s * 1000.0


def test_readings_that_agree_with_the_curve_carry_no_noise(fitted) -> None:
    """The first-token service read with 3% jitter: no step near the SLO flips, so no noise."""
    fit, (_, _, p99) = fitted
    assert fit.p99_noise_log_sd < 0.05
