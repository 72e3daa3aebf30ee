"""The what-if queueing core against closed forms and a discrete-event simulation (simpy).

The DES serves a general service time: exponential (cv 1) or a constant plus an exponential
(cv < 1, the core's shape), with an optional latency floor added to every response.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.whatif.queueing import (_wait_rate, busy_growth, erlang_c, max_arrival_within_slo,
                                     response_quantile, response_survival, service_shape,
                                     step_latency)


def des_response_times(rates_rps: list[float], servers: list[int], mu_rps: float,
                       step_s: float, seed: int, cv: float = 1.0, floor_s: float = 0.0
                       ) -> np.ndarray:
    """FIFO M/G/c with a piecewise-constant arrival rate and server count, one step each.

    Service time has mean 1 / mu and coefficient of variation ``cv`` (<= 1): a constant
    (1 - cv) / mu plus an exponential of mean cv / mu; ``floor_s`` is added to every
    response. Server count changes take effect for requests starting service after the
    change.
    """
    rng = np.random.default_rng(seed)
    const_s, exp_mean_s = (1.0 - cv) / mu_rps, cv / mu_rps
    env = simpy.Environment()
    max_c = max(servers)
    res = simpy.Resource(env, capacity=max_c)
    out: list[float] = []
    # Servers above the step's count are held by blockers, released when the count rises.
    blockers: list = []

    def adjust(step: int):
        want_blocked = max_c - servers[step]
        while len(blockers) < want_blocked:
            req = res.request()
            blockers.append(req)
            yield req
        while len(blockers) > want_blocked:
            res.release(blockers.pop())

    def customer(t0: float):
        with res.request() as req:
            yield req
            yield env.timeout(const_s + (rng.exponential(exp_mean_s) if cv > 0 else 0.0))
        out.append(env.now - t0 + floor_s)

    def source():
        for step, lam in enumerate(rates_rps):
            env.process(adjust(step))
            end = (step + 1) * step_s
            t = env.now
            while True:
                t += rng.exponential(1.0 / lam)
                if t >= end:
                    break
                yield env.timeout(t - env.now)
                env.process(customer(env.now))
            yield env.timeout(end - env.now)

    env.process(source())
    env.run()
    return np.asarray(out)


@pytest.mark.parametrize("c,rho", [(1, 0.7), (4, 0.85), (16, 0.9), (32, 0.95)])
def test_stable_p99_agrees_with_des_within_10pct(c: int, rho: float) -> None:
    mu = 50.0
    lam = rho * c * mu
    step_s = 4000.0 / lam  # ~4000 requests per replication
    samples = np.concatenate([des_response_times([lam] * 10, [c] * 10, mu, step_s, seed)
                              for seed in range(2)])
    des_p99 = float(np.quantile(samples, 0.99))
    pw = erlang_c(np.array([c]), np.array([lam / mu]))
    model = float(response_quantile(0.99, pw, _wait_rate(np.array([c]), np.array([lam]),
                                                         np.array([mu]), 1.0),
                                    np.array([mu]))[0])
    assert model == pytest.approx(des_p99, rel=0.10)


def test_time_varying_overall_p99_agrees_with_des() -> None:
    mu = 40.0
    rates = [60.0, 150.0, 90.0, 220.0, 120.0, 60.0]
    servers = [3, 5, 4, 7, 4, 3]
    step_s = 60.0
    samples = np.concatenate([des_response_times(rates, servers, mu, step_s, seed)
                              for seed in range(3)])
    lat = step_latency(np.array(rates), np.array(servers, dtype=float), mu, step_s=step_s,
                       slo_s=0.2, timeout_s=30.0)
    assert lat.overall_p99_s == pytest.approx(float(np.quantile(samples, 0.99)), rel=0.10)
    # Compliance by requests agrees too (within 2 points).
    assert lat.within_slo.sum() / lat.arrivals.sum() == pytest.approx(
        float(np.mean(samples <= 0.2)), abs=0.02)


def test_erlang_c_known_values() -> None:
    # M/M/1: P(wait) = rho; M/M/2 at A=1: C = 1/3 (textbook).
    assert erlang_c(np.array([1.0]), np.array([0.6]))[0] == pytest.approx(0.6)
    assert erlang_c(np.array([2.0]), np.array([1.0]))[0] == pytest.approx(1.0 / 3.0)
    assert erlang_c(np.array([4.0]), np.array([4.0]))[0] == 1.0  # unstable
    assert erlang_c(np.array([500.0]), np.array([100.0]))[0] == 0.0  # never waits


def test_mm1_response_quantile_is_closed_form() -> None:
    # M/M/1 response time is Exp(mu - lambda).
    mu, lam = 10.0, 7.0
    pw = erlang_c(np.array([1.0]), np.array([lam / mu]))
    x = response_quantile(0.99, pw, _wait_rate(np.array([1.0]), np.array([lam]),
                                               np.array([mu]), 1.0), np.array([mu]))
    assert x[0] == pytest.approx(np.log(100.0) / (mu - lam), rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 400), rho=st.floats(0.01, 0.995), mu=st.floats(0.5, 500.0))
def test_quantile_inverts_survival(c: int, rho: float, mu: float) -> None:
    lam = rho * c * mu
    cc, ll, mm = np.array([float(c)]), np.array([lam]), np.array([mu])
    pw = erlang_c(cc, ll / mm)
    wr = _wait_rate(cc, ll, mm, 1.0)
    x = response_quantile(0.99, pw, wr, mm)
    assert response_survival(x, pw, wr, mm)[0] == pytest.approx(0.01, rel=1e-4)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 200), rho=st.floats(0.05, 0.98))
def test_more_servers_never_raise_p99(c: int, rho: float) -> None:
    mu = 20.0
    lam = rho * c * mu
    cs = np.array([float(c), float(c + 1), float(c + 5)])
    ll = np.full(3, lam)
    mm = np.full(3, mu)
    x = response_quantile(0.99, erlang_c(cs, ll / mm), _wait_rate(cs, ll, mm, 1.0), mm)
    assert x[0] >= x[1] - 1e-9 >= x[2] - 2e-9


def test_overload_carries_backlog_and_fails_past_timeout() -> None:
    lam = np.array([100.0, 300.0, 300.0, 300.0, 50.0, 50.0, 50.0])
    servers = np.full(7, 10.0)  # 10 x 20 = 200 req/s
    lat = step_latency(lam, servers, 20.0, step_s=60.0, slo_s=0.5, timeout_s=5.0)
    assert lat.backlog[0] == 0.0
    # The backlog is capped at what the timeout allows (capacity x timeout = 1000).
    assert lat.backlog[1:4].max() == pytest.approx(1000.0)
    assert lat.failed[1:4].sum() == pytest.approx(3 * 100 * 60 - 1000.0)
    assert np.all(lat.p99_s[1:4] == 5.0)
    assert lat.backlog[4] == 0.0  # drained at 150 req/s spare within the step
    assert lat.p99_s[6] < 0.5
    assert lat.overall_p99_s == 5.0  # over 1% of requests failed


def test_no_servers_means_everything_fails() -> None:
    lat = step_latency(np.array([10.0, 10.0]), np.zeros(2), 5.0, step_s=60.0, slo_s=1.0,
                       timeout_s=2.0)
    assert lat.failed.sum() == pytest.approx(1200.0)
    assert lat.within_slo.sum() == 0.0


def test_max_arrival_within_slo_is_the_boundary() -> None:
    c = np.array([8.0, 32.0, 128.0])
    mu, slo = 60.0, 0.1
    lam = max_arrival_within_slo(c, mu, slo)
    assert np.all(np.diff(lam) > 0)
    for ci, li in zip(c, lam):
        for f, ok in ((0.999, True), (1.01, False)):
            x = li * f
            cc, ll, mm = np.array([ci]), np.array([x]), np.array([mu])
            p99 = response_quantile(0.99, erlang_c(cc, ll / mm), _wait_rate(cc, ll, mm, 1.0),
                                    mm)[0]
            assert (p99 <= slo) == ok
    # A service whose p99 alone misses the SLO can absorb nothing.
    assert max_arrival_within_slo(np.array([100.0]), 10.0, 0.1)[0] == 0.0


@settings(max_examples=4, deadline=None, derandomize=True)
@given(c=st.integers(1, 12), rho=st.floats(0.3, 0.85))
def test_des_agreement_on_generated_small_cases(c: int, rho: float) -> None:
    mu = 30.0
    lam = rho * c * mu
    samples = des_response_times([lam] * 10, [c] * 10, mu, 4000.0 / lam, seed=c)
    cc, ll, mm = np.array([float(c)]), np.array([lam]), np.array([mu])
    model = response_quantile(0.99, erlang_c(cc, ll / mm), _wait_rate(cc, ll, mm, 1.0), mm)[0]
    assert model == pytest.approx(float(np.quantile(samples, 0.99)), rel=0.10)


def _model_p99(c: int, lam: float, mu: float, cv: float, floor_s: float = 0.0) -> float:
    cc, ll, mm = np.array([float(c)]), np.array([lam]), np.array([mu])
    rate, shift = service_shape(mm, cv)
    q = response_quantile(0.99, erlang_c(cc, ll / mm), _wait_rate(cc, ll, mm, cv, rate), rate)
    return float(q[0] + shift[0] + floor_s)


@pytest.mark.parametrize("c,rho,cv", [(1, 0.7, 0.5), (4, 0.85, 0.5), (16, 0.9, 0.25),
                                      (8, 0.8, 0.0)])
def test_general_service_p99_agrees_with_des_within_10pct(c: int, rho: float, cv: float
                                                          ) -> None:
    """M/G/c (Allen-Cunneen wait, shifted-exponential service) plus a floor vs the DES."""
    mu, floor_s = 50.0, 0.03
    lam = rho * c * mu
    samples = np.concatenate([des_response_times([lam] * 10, [c] * 10, mu, 4000.0 / lam, seed,
                                                 cv=cv, floor_s=floor_s)
                              for seed in range(2)])
    assert _model_p99(c, lam, mu, cv, floor_s) == pytest.approx(
        float(np.quantile(samples, 0.99)), rel=0.10)
    # The exponential-service model would be far off for a low cv: the shape matters.
    if cv <= 0.25:
        assert _model_p99(c, lam, mu, 1.0, floor_s) > 1.3 * float(np.quantile(samples, 0.99))


def test_time_varying_general_service_agrees_with_des() -> None:
    mu, cv, floor_s = 40.0, 0.5, 0.05
    rates = [60.0, 150.0, 90.0, 220.0, 120.0, 60.0]
    servers = [3, 5, 4, 7, 4, 3]
    samples = np.concatenate([des_response_times(rates, servers, mu, 60.0, seed, cv=cv,
                                                 floor_s=floor_s) for seed in range(2)])
    lat = step_latency(np.array(rates), np.array(servers, dtype=float), mu, step_s=60.0,
                       slo_s=0.2, timeout_s=30.0, cv=cv, floor_s=floor_s)
    assert lat.overall_p99_s == pytest.approx(float(np.quantile(samples, 0.99)), rel=0.10)
    assert lat.within_slo.sum() / lat.arrivals.sum() == pytest.approx(
        float(np.mean(samples <= 0.2)), abs=0.02)


def test_floor_and_busy_slowdown_add_to_the_response() -> None:
    lam = np.array([20.0, 100.0, 180.0])
    servers = np.full(3, 400.0)  # never waits: the response is the fixed part + service
    base = step_latency(lam, servers, 0.5, step_s=60.0, slo_s=5.0, timeout_s=60.0, cv=0.0)
    floored = step_latency(lam, servers, 0.5, step_s=60.0, slo_s=5.0, timeout_s=60.0, cv=0.0,
                           floor_s=0.3)
    busy = step_latency(lam, servers, 0.5, step_s=60.0, slo_s=5.0, timeout_s=60.0, cv=0.0,
                        floor_s=0.3, busy_slowdown=6.0)
    assert np.allclose(floored.p99_s - base.p99_s, 0.3, atol=1e-6)
    occ = lam / (400.0 * 0.5)
    # The fixed part (floor + the service's constant 2 s) grows with occupancy^4.
    expected = (0.3 + 2.0 * (1 - 0.02)) * busy_growth(6.0, occ) + base.p99_s - 2.0 * 0.98
    assert np.allclose(busy.p99_s, expected, rtol=1e-6)
    assert busy.p99_s[2] > busy.p99_s[1] > busy.p99_s[0]
    # Defaults leave the response as it was.
    plain = step_latency(lam, servers, 0.5, step_s=60.0, slo_s=5.0, timeout_s=60.0, cv=0.0,
                         floor_s=0.0, busy_slowdown=0.0)
    assert np.array_equal(plain.p99_s, base.p99_s)


def test_max_arrival_within_slo_counts_the_floor() -> None:
    c = np.array([8.0, 32.0])
    lam = max_arrival_within_slo(c, 60.0, 0.1, cv=0.5)
    lam_floor = max_arrival_within_slo(c, 60.0, 0.1, cv=0.5, floor_s=0.03)
    assert np.all(lam_floor < lam)
    # A floor alone past the SLO leaves no room at all.
    assert max_arrival_within_slo(c, 60.0, 0.1, floor_s=0.2).max() == 0.0
