"""The queueing core: latency of a pool of identical slots, per step, from arrays.

A continuous-batching replica is ``concurrency`` servers, so a step's servers are ready
replicas x concurrency. While a step is stable (arrivals below capacity, no backlog) its
response time is a latency floor (prefill, network) plus the M/G/c wait (Erlang C with the
Allen-Cunneen factor (1 + cv^2) / 2 on its scale) plus the service time; the fixed part (the
floor and the service's constant part) may grow as the slots fill, x (1 + slowdown x
occupancy^4) (continuous batching: prefill shares the GPU with the decodes in flight; bounded,
unlike queueing, and the slots' throughput stays what mu says); while overloaded
a backlog is carried from step to step and requests whose wait would pass the client timeout
fail. The service time has mean 1 / mu and coefficient of variation cv: exponential at
cv >= 1 (above 1 only the wait feels cv), a shifted exponential (a constant (1 - cv) / mu plus
an exponential of mean cv / mu) below, which keeps the response-time tail in closed form.
When the SLO is on time to first token the slot's service is not in the measured latency
(the slot goes on decoding): then the response is the floor plus the wait alone.
Everything is vectorised over steps; the only Python loop walks overloaded stretches, which
are rare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Below this many standard deviations of headroom (servers - offered load) the chance of
# waiting is under ~1e-15: skip the incomplete-gamma call there (it dominates the cost).
_NEGLIGIBLE_WAIT_SIGMAS = 8.0


def _exp_neg(z: np.ndarray) -> np.ndarray:
    """exp(-z), floored at exp(-300): subnormal numbers (here and in products of these) make
    numpy's arithmetic ~100x slower, and nothing below 1e-130 matters to a 1% tail."""
    return np.exp(-np.minimum(z, 300.0))


def erlang_c(servers: np.ndarray, offered_erlangs: np.ndarray) -> np.ndarray:
    """Probability that an arrival waits in M/M/c (Erlang C), vectorised.

    Parameters
    ----------
    servers:
        c per element (>= 0).
    offered_erlangs:
        A = lambda / mu per element.

    Returns
    -------
    np.ndarray
        P(wait) in [0, 1]; 1 where A >= c (unstable or no servers).
    """
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(offered_erlangs, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    out = np.ones(c.shape, dtype=np.float64)
    stable = (a < c) & (c > 0)
    out[stable & (a <= 0)] = 0.0
    work = stable & (a > 0)
    far = work & ((c - a) > _NEGLIGIBLE_WAIT_SIGMAS * np.sqrt(a) + 5.0)
    out[far] = 0.0
    idx = np.flatnonzero(work & ~far)
    if idx.size:
        from scipy.special import gammaincc, gammaln  # loaded on the first queue that waits

        cc, aa = c.flat[idx], a.flat[idx]
        # Erlang B = Poisson pmf(c; A) / cdf(c; A); the cdf is the regularised upper gamma.
        log_pmf = cc * np.log(aa) - aa - gammaln(cc + 1.0)
        b = np.exp(log_pmf) / np.maximum(gammaincc(cc + 1.0, aa), 1e-300)
        b = np.clip(b, 0.0, 1.0)
        rho = aa / cc
        pw = b / (1.0 - rho * (1.0 - b))
        # Flush negligible waits to zero: keeps subnormals out of later products.
        out.flat[idx] = np.where(pw < 1e-30, 0.0, pw)
    return out


# Below this cv the service time is treated as this cv (its exponential part's rate is
# mu / cv): keeps the closed form finite; at 0.02 the exponential part is 2% of the mean.
_MIN_CV = 0.02
# Service rate standing for "not part of the measured latency" (a 1 ns service).
_UNMEASURED_RATE = 1e9


def service_shape(mu: np.ndarray | float, cv: float, in_latency: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Service time as shift + Exp(rate): ``(rate, shift_s)`` for mean 1 / mu and cv.

    At cv >= 1 the service is exponential (rate mu, no shift); below, a shifted exponential
    with the same mean and cv: rate mu / cv after (1 - cv) / mu. When the measured latency
    does not include the service (``in_latency`` false: time to first token, while the
    slot goes on decoding) it is a nanosecond: only the wait and the floor remain.
    """
    m = np.asarray(mu, dtype=np.float64)
    if not in_latency:
        return np.full(m.shape, _UNMEASURED_RATE), np.zeros(m.shape)
    k = min(max(float(cv), _MIN_CV), 1.0)
    return m / k, (1.0 - k) / np.maximum(m, 1e-300)


def busy_growth(slowdown: float, occupancy: np.ndarray | float) -> np.ndarray:
    """Growth of a response's fixed part at slot ``occupancy`` (0..1): 1 + slowdown x occ^4."""
    occ = np.clip(np.asarray(occupancy, dtype=np.float64), 0.0, 1.0)
    return 1.0 + slowdown * occ ** 4


def _wait_rate(servers: np.ndarray, lam: np.ndarray, mu: np.ndarray, cv: float,
               svc_rate: np.ndarray | None = None) -> np.ndarray:
    """Decay rate of the conditional waiting time, with the Allen-Cunneen M/G/c factor.

    ``svc_rate`` is the rate of the service time's exponential part (``mu`` by default);
    the closed form divides by (wait rate - svc_rate), so that coincidence is nudged.
    """
    a = (servers * mu - lam) * (2.0 / (1.0 + cv * cv))
    r = mu if svc_rate is None else svc_rate
    close = np.abs(a - r) < 1e-9 * r
    return np.where(close, r * (1.0 + 1e-6), a)


def response_survival(x_s: np.ndarray | float, pwait: np.ndarray, wait_rate: np.ndarray,
                      mu: np.ndarray) -> np.ndarray:
    """P(response > x) for wait (0 w.p. 1 - pwait, else Exp(wait_rate)) plus Exp(mu) service."""
    x = np.maximum(np.asarray(x_s, dtype=np.float64), 0.0)
    es = _exp_neg(mu * x)
    ew = _exp_neg(wait_rate * x)
    mixed = (wait_rate * es - mu * ew) / (wait_rate - mu)
    return np.clip((1.0 - pwait) * es + pwait * mixed, 0.0, 1.0)


def response_quantile(q: float, pwait: np.ndarray, wait_rate: np.ndarray, mu: np.ndarray,
                      iterations: int = 30) -> np.ndarray:
    """The q-quantile of response time (seconds) of stable M/M/c steps, vectorised.

    Safeguarded Newton on log survival inside a bracket that bisection would also keep;
    steps that (almost) never wait are answered by the service quantile alone.
    """
    tail = 1.0 - q
    pwait, wait_rate, mu = np.broadcast_arrays(np.asarray(pwait, dtype=np.float64),
                                               np.asarray(wait_rate, dtype=np.float64),
                                               np.asarray(mu, dtype=np.float64))
    out = np.log(1.0 / tail) / mu
    unstable = wait_rate <= 0
    out[unstable] = np.inf
    idx = np.flatnonzero((pwait > 1e-9 * tail) & ~unstable)
    if idx.size == 0:
        return out
    pw, wr, m_ = pwait[idx], wait_rate[idx], mu[idx]
    ln_tail = np.log(tail)
    lo = out[idx].copy()
    hi = 2.0 * np.log(2.0 / tail) / np.minimum(m_, wr)
    x = np.clip(np.log(np.maximum(pw, 1e-300) / tail) / wr + 1.0 / m_, lo, hi)
    inv = 1.0 / (wr - m_)
    for _ in range(iterations):
        es = _exp_neg(m_ * x)
        ew = _exp_neg(wr * x)
        s = np.maximum((1.0 - pw) * es + pw * (wr * es - m_ * ew) * inv, 1e-300)
        ds = -(1.0 - pw) * m_ * es - pw * wr * m_ * (es - ew) * inv
        above = s > tail
        lo = np.where(above, x, lo)
        hi = np.where(above, hi, x)
        nx = x - (np.log(s) - ln_tail) * s / np.minimum(ds, -1e-300)
        bad = ~((nx >= lo) & (nx <= hi))
        nx = np.where(bad, 0.5 * (lo + hi), nx)
        done = np.max(np.abs(nx - x) / nx) < 1e-7
        x = nx
        if done:
            break
    out[idx] = x
    return out


@dataclass
class StepLatency:
    """Latency of each step and the period's totals (times in seconds)."""

    p99_s: np.ndarray  # per-step p99 response time, capped at the timeout
    within_slo: np.ndarray  # requests answered within the SLO per step
    arrivals: np.ndarray  # requests arriving per step
    failed: np.ndarray  # requests that passed the timeout per step
    backlog: np.ndarray  # requests queued at the end of each step
    overall_p99_s: float  # p99 over every request of the period


class StableMemo:
    """Stable-step results of earlier calls on the same arrivals, SLO and cv.

    Policies replaying one demand mostly differ in a few hours; a step whose servers and
    service rate match what an earlier policy had reuses its Erlang C, tail rate, p99 and
    SLO share instead of recomputing them (the costly part).
    """

    def __init__(self, n: int) -> None:
        self.c = np.full(n, np.nan)
        self.mu = np.full(n, np.nan)
        self.pw = np.zeros(n)
        self.wr = np.zeros(n)
        self.p99 = np.zeros(n)
        self.surv = np.zeros(n)


def step_latency(lam_rps: np.ndarray, servers: np.ndarray, mu_rps: np.ndarray | float, *,
                 step_s: float, slo_s: float, timeout_s: float, cv: float = 1.0,
                 floor_s: float = 0.0, busy_slowdown: float = 0.0,
                 service_in_latency: bool = True, memo: StableMemo | None = None
                 ) -> StepLatency:
    """Latency per step for arrival rates ``lam_rps`` served by ``servers`` slots.

    Parameters
    ----------
    lam_rps:
        Arrival rate per step (requests/s).
    servers:
        Serving slots per step (ready replicas x concurrency).
    mu_rps:
        Service rate per slot (requests/s), scalar or per step (interference slows it).
    step_s, slo_s, timeout_s:
        Step length, SLO on response time, client timeout, seconds.
    cv:
        Service-time coefficient of variation (1 = exponential).
    floor_s, busy_slowdown:
        Time every response takes on top of waiting and service (prefill, network) on idle
        slots, and the growth of that plus the service's constant part at full occupancy
        (``busy_growth``).
    service_in_latency:
        Whether the measured latency includes the slot's service (``service_shape``).
    memo:
        Shared between calls with the same ``lam_rps``, ``slo_s``, ``timeout_s``, ``cv`` and
        floor (``compare`` does this across policies); results are identical without it.
    """
    lam = np.asarray(lam_rps, dtype=np.float64)
    n = lam.shape[0]
    c = np.asarray(servers, dtype=np.float64)
    mu = np.broadcast_to(np.asarray(mu_rps, dtype=np.float64), (n,)).astype(np.float64)
    cap_rps = c * mu
    arrivals = lam * step_s
    rate, svc_shift = service_shape(mu, cv, service_in_latency)
    grow = busy_growth(busy_slowdown, np.where(cap_rps > 0, lam / np.maximum(cap_rps, 1e-300),
                                               1.0))
    shift = (svc_shift + floor_s) * grow
    # Overloaded steps answer after the backlog's wait plus a mean service.
    over_add = 1.0 / np.maximum(rate, 1e-300) + shift

    backlog, failed, over = _carry_backlog(lam, cap_rps, step_s, timeout_s)
    prev = np.concatenate(([0.0], backlog[:-1]))
    stable = ~over

    p99 = np.full(n, float(timeout_s))
    within = np.zeros(n)
    pw = np.ones(n)
    wr = np.ones(n)
    if stable.any():
        s_idx = np.flatnonzero(stable)
        cs, ms = c[s_idx], mu[s_idx]
        if memo is not None:
            hit = (memo.c[s_idx] == cs) & (memo.mu[s_idx] == ms)
            todo = s_idx[~hit]
        else:
            todo = s_idx
        ct, lt, mt, rt, st = c[todo], lam[todo], mu[todo], rate[todo], shift[todo]
        pw_t = erlang_c(ct, lt / mt)
        wr_t = _wait_rate(ct, lt, mt, cv, rt)
        q_t = np.minimum(response_quantile(0.99, pw_t, wr_t, rt) + st, timeout_s)
        sv_t = response_survival(slo_s - st, pw_t, wr_t, rt)
        if memo is None:
            pw, wr, q, sv = pw_t, wr_t, q_t, sv_t
        else:
            memo.c[todo], memo.mu[todo] = ct, mt
            memo.pw[todo], memo.wr[todo], memo.p99[todo], memo.surv[todo] = pw_t, wr_t, q_t, sv_t
            pw, wr, q, sv = memo.pw[s_idx], memo.wr[s_idx], memo.p99[s_idx], memo.surv[s_idx]
        p99[s_idx] = q
        within[s_idx] = arrivals[s_idx] * (1.0 - sv)
    o_idx = np.flatnonzero(over)
    w0 = w1 = np.zeros(0)
    if o_idx.size:
        safe_cap = np.maximum(cap_rps[o_idx], 1e-12)
        w0 = prev[o_idx] / safe_cap
        w1 = backlog[o_idx] / safe_cap
        mean_s = over_add[o_idx]
        p99[o_idx] = np.minimum(np.maximum(w0, w1) + mean_s, timeout_s)
        p99[o_idx[cap_rps[o_idx] <= 0]] = timeout_s
        share = _uniform_share_below(slo_s - mean_s, w0, w1)
        share[cap_rps[o_idx] <= 0] = 0.0
        within[o_idx] = (arrivals[o_idx] - failed[o_idx]) * share

    overall = _overall_p99(arrivals, stable, pw, wr, rate, shift, over_add, failed,
                           o_idx, w0, w1, timeout_s, p99)
    return StepLatency(p99_s=p99, within_slo=within, arrivals=arrivals, failed=failed,
                       backlog=backlog, overall_p99_s=overall)


def _uniform_share_below(thr: np.ndarray | float, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """Share of a wait that moves linearly from w0 to w1 over the step spent at or below thr."""
    lo, hi = np.minimum(w0, w1), np.maximum(w0, w1)
    span = hi - lo
    flat = span <= 1e-12
    share = np.where(flat, (lo <= thr).astype(np.float64),
                     np.clip((thr - lo) / np.where(flat, 1.0, span), 0.0, 1.0))
    return share


def _carry_backlog(lam: np.ndarray, cap_rps: np.ndarray, step_s: float, timeout_s: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backlog recursion B_t = clip(B_{t-1} + (lam - cap) step, 0, cap * timeout).

    Only stretches that start with an overloaded step are walked in Python; a stretch ends
    when the backlog is empty again.
    """
    n = lam.shape[0]
    backlog = np.zeros(n)
    failed = np.zeros(n)
    over = np.zeros(n, dtype=bool)
    inflow = (lam - cap_rps) * step_s
    starts = np.flatnonzero(inflow > 0)
    if starts.size == 0:
        return backlog, failed, over
    inflow_l = inflow.tolist()
    limit_l = (cap_rps * timeout_s).tolist()
    b = 0.0
    t = int(starts[0])
    k = 0
    while t < n:
        v = b + inflow_l[t]
        lim = limit_l[t]
        if v > lim:
            failed[t] = v - lim
            v = lim
        if v < 0.0:
            v = 0.0
        over[t] = True
        backlog[t] = v
        b = v
        t += 1
        if b <= 0.0:
            # Jump to the next overloaded step.
            k = int(np.searchsorted(starts, t))
            if k >= starts.size:
                break
            t = int(starts[k])
    return backlog, failed, over


def _overall_p99(arrivals: np.ndarray, stable: np.ndarray, pw: np.ndarray, wr: np.ndarray,
                 rate: np.ndarray, shift: np.ndarray, over_add_s: np.ndarray,
                 failed: np.ndarray, o_idx: np.ndarray, w0: np.ndarray, w1: np.ndarray,
                 timeout_s: float, p99_steps: np.ndarray) -> float:
    """p99 over all requests: x with sum_t n_t P_t(T > x) = 1% of all requests.

    Stable steps answer after ``shift`` plus a wait and an Exp(``rate``) service; overloaded
    ones after their backlog's wait plus ``over_add_s`` (mean service and floor).

    The answer lies between the smallest and the largest step p99 (at those points every
    step is above, resp. below, 1%); the Illinois variant of regula falsi on log excess
    finds it in a handful of evaluations.
    """
    total = float(arrivals.sum())
    if total <= 0:
        return 0.0
    target = 0.01 * total
    n_fail = float(failed.sum())
    if n_fail >= target:
        return float(timeout_s)
    s_idx = np.flatnonzero(stable)
    n_s = arrivals[s_idx]
    rate_s, shift_s = rate[s_idx], shift[s_idx]
    add_o = over_add_s[o_idx]
    n_o = arrivals[o_idx] - failed[o_idx]
    busy = arrivals > 0
    if not busy.any():
        return 0.0
    lo = float(p99_steps[busy].min())
    hi = float(p99_steps[busy].max())
    if hi - lo <= 1e-9 * max(hi, 1e-12):
        return hi

    def f(x: float) -> float:
        tot = n_fail
        if s_idx.size:
            tot += float((n_s * response_survival(x - shift_s, pw, wr, rate_s)).sum())
        if o_idx.size:
            tot += float((n_o * (1.0 - _uniform_share_below(x - add_o, w0, w1))).sum())
        return np.log(max(tot, 1e-300)) - np.log(target)

    f_lo, f_hi = f(lo), f(hi)
    if f_lo <= 0:
        return lo
    if f_hi >= 0:
        return hi
    side = 0
    for _ in range(60):
        x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        fx = f(x)
        if abs(fx) < 1e-7 or hi - lo < 1e-7 * hi:
            return x
        if fx > 0:
            lo, f_lo = x, fx
            if side == 1:
                f_hi *= 0.5
            side = 1
        else:
            hi, f_hi = x, fx
            if side == -1:
                f_lo *= 0.5
            side = -1
    return 0.5 * (lo + hi)


def max_arrival_within_slo(servers: np.ndarray, mu_rps: float, slo_s: float, cv: float = 1.0,
                           q: float = 0.99, floor_s: float = 0.0,
                           busy_slowdown: float = 0.0, service_in_latency: bool = True
                           ) -> np.ndarray:
    """Largest arrival rate (requests/s) with stable p99 response <= SLO, per server count.

    Zero where even one request's floor plus service p99 exceeds the SLO or there are no
    servers.
    """
    c = np.asarray(servers, dtype=np.float64)
    out = np.zeros(c.shape)
    rate1, shift1 = service_shape(float(mu_rps), cv, service_in_latency)
    shift = float(shift1)
    ok = (c > 0) & (np.log(1.0 / (1.0 - q)) / float(rate1) + shift + floor_s <= slo_s)
    if not ok.any():
        return out
    cc = c[ok]
    lo = np.zeros(cc.shape)
    hi = cc * mu_rps
    mu = np.full(cc.shape, float(mu_rps))
    rate = np.full(cc.shape, float(rate1))
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        pw = erlang_c(cc, mid / mu)
        wr = _wait_rate(cc, mid, mu, cv, rate)
        fixed = (shift + floor_s) * busy_growth(busy_slowdown, mid / (cc * mu))
        good = response_quantile(q, pw, wr, rate) + fixed <= slo_s
        lo = np.where(good, mid, lo)
        hi = np.where(good, hi, mid)
    out[ok] = lo
    return out
