"""Fitting the model's service to what the store saw: slots, speed, autoscaler, warm-up.

The model's latency is a floor plus queueing (M/G/c over ready replicas x concurrency slots)
plus, unless the SLO is on time to first token, the service; so the fit chooses the slot
count, the slot speed, the service-time variability, whether the service is in the measured
latency and how much the fixed part grows as slots fill, whose p99 curve over observed
(traffic, ready replicas) agrees best with the observed p99: first on which steps break the
SLO (what violation minutes count), then on log p99. For each candidate the floor is what the
uncontended steps (load per replica at or below its median) show above the queueing p99: a
time-to-first-token SLO sees prefill, not the slot's whole hold, so the floor carries the
level and the slots carry how p99 rises with load. A replay of the steps in order then picks
the capacity (how fast backlogs drain) and the clients' patience (where p99 plateaus). The
autoscaler's target is read off desired replicas against traffic; warm-up off the lag from a
scale-up that free GPUs could place to the replicas being ready; the replica maximum off a
desired-replica count the autoscaler kept while traffic asked for more (without autoscaler
metrics, off the ready replicas). The store's p99 is a reading that scatters around the model's
curve: the replay stage fits how much (``p99_noise_log_sd``), and a modelled step is over the
SLO with the chance its reading would be.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from analytics.measures import over_slo, over_slo_chance, weighted_quantile
from analytics.whatif.queueing import (_wait_rate, erlang_c, response_quantile,
                                     service_shape, step_latency)

CONCURRENCY_GRID = (1, 2, 4, 8, 16, 32, 64)
CV_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
SLOWDOWN_GRID = (0.0, 0.5, 1.0, 2.0, 3.0, 4.5, 6.0, 9.0, 14.0)
CAPACITY_POINTS = 28  # replica capacities tried per (concurrency, cv)
REPLAY_POINTS = 25  # capacities the replay stage tries
P99_WEIGHT = 5.0  # replay stage: weight of |log(period p99 model / observed)|
MAX_FIT_POINTS = 4000
# The slot rates a scenario accepts (``ServiceParams.service_rate_per_slot_rps``).
MU_RANGE = (0.001, 10000.0)
RESHAPES = 12  # shapes the grid tries again under the reading noise
# The reading noise the replay tries (sd of log(read p99 / modelled p99)); the first stands
# for none (a model that calls every step as the store did suits it best).
NOISE_GRID = tuple(float(x) for x in np.geomspace(0.01, 1.0, 41))


@dataclass
class ServiceFit:
    """The fitted service: per-slot rate, slots per replica, cv, floor, and how well it agrees."""

    service_rate_per_slot_rps: float
    concurrency: int
    service_cv: float
    latency_floor_ms: float
    busy_slowdown: float
    service_in_latency: bool
    timeout_s: float | None  # the clients' patience the replay chose (None: not fitted)
    steps_used: int
    slo_agreement: float  # share of steps where model and store agree on p99 > SLO
    log_p99_mae: float  # mean |log(model p99 / observed p99)|
    p99_noise_log_sd: float = 0.0  # how the store's over/under-SLO calls scatter around the model


def stable_p99_parts(lam: np.ndarray, replicas: np.ndarray, mu: float, conc: int, cv: float,
                     in_latency: bool = True, pwait: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
    """Stable-queue p99 (ms) per step without the service's constant part (inf where
    overloaded), and that constant part (ms). ``pwait`` is ``erlang_c(replicas * conc, lam /
    mu)`` when the caller has it (it depends on neither cv nor ``in_latency``)."""
    c = replicas * conc
    mu_a = np.full(lam.shape, mu)
    rate, shift = service_shape(mu_a, cv, in_latency)
    pw = erlang_c(c, lam / mu) if pwait is None else pwait
    wr = _wait_rate(c, lam, mu_a, cv, rate)
    q = response_quantile(0.99, pw, wr, rate)
    q = np.where((lam >= c * mu) | (c <= 0), np.inf, q)
    return q * 1000.0, float(shift[0]) * 1000.0 if shift.size else 0.0


def _loss_terms(weight: np.ndarray, obs: np.ndarray, slo_ms: float,
                noise_log_sd: float | np.ndarray = 0.0
                ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The fit's loss of model p99 series ``m`` (one per row) against ``obs`` (see
    ``fit_service``): per row ``(loss, agreement on the SLO, |log error|)``, the last per row
    and step (its weighted mean is the row's mean |log error|: ``mean_abs_log_error``, asked
    of the chosen row only). A model step is over the SLO with the chance its reading would be
    (``over_slo_chance`` with ``noise_log_sd``), so the count and the calls are what the store
    would show; a column of noises (all above 0) scores one series under each, a row per noise."""
    noisy = bool(np.all(np.asarray(noise_log_sd) > 0))
    obs_over = over_slo(obs, slo_ms)
    w_over = weight * obs_over
    w_under = weight * ~obs_over
    # The three weighted sums of the calls in one product (one pass over the rows).
    sums_by = np.stack([w_over, weight, w_under], axis=1)
    n_over = float(w_over.sum())
    n_under = float(w_under.sum())
    total = float(weight.sum())
    log_obs = np.log(obs)
    # Under noise, the steps the store read over the SLO and those it read under apart: each
    # side needs the logarithm of one chance (read over; read under), not of both on every step,
    # and the replay asks it of every noise of the grid (a row each).
    o_idx, u_idx = np.flatnonzero(obs_over), np.flatnonzero(~obs_over)
    w_o, w_u = weight[o_idx], weight[u_idx]

    def calls(m2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per row: the weights of the steps called over that the store read over, of all
        called over, of those called over that it read under; and the calls' log likelihood
        (under noise only; zeros without)."""
        if not noisy:
            sums = over_slo_chance(m2, slo_ms) @ sums_by
            return sums[:, 0], sums[:, 1], sums[:, 2], np.zeros(m2.shape[0])
        over_o = over_slo_chance(m2[:, o_idx], slo_ms, noise_log_sd)
        over_u = over_slo_chance(m2[:, u_idx], slo_ms, noise_log_sd)
        hit_w, miss_w = over_o @ w_o, over_u @ w_u
        # Chances, not calls: the likelihood of the store's calls (a balanced accuracy of
        # chances rewards pushing every step away from the SLO, and over-counts).
        loglik = (np.log(np.clip(over_o, 1e-9, 1.0 - 1e-9)) @ w_o
                  + np.log1p(-np.clip(over_u, 1e-9, 1.0 - 1e-9)) @ w_u)
        return hit_w, hit_w + miss_w, miss_w, loglik

    def loss(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m2 = np.atleast_2d(m)
        hit_w, over_w, false_w, loglik = calls(m2)
        quiet_w = n_under - false_w
        agree = (hit_w + quiet_w) / total
        # Balanced: the few steps above the SLO weigh as much as all the others; and the
        # count of such steps should come out right (violation minutes are a count).
        hit = hit_w / n_over if n_over else np.ones(hit_w.shape[0])
        quiet = quiet_w / n_under if n_under else np.ones(hit_w.shape[0])
        count = np.abs(over_w - n_over) / max(n_over, 1.0)
        log_err = np.log(np.maximum(m2, 1e-9)) - log_obs
        err = np.minimum(log_err ** 2, 4.0) @ weight / total
        if noisy:
            value = 10.0 * -loglik / (2.0 * max(n_over, 1.0)) + 5.0 * count + err
        else:
            value = 10.0 * (1.0 - 0.5 * (hit + quiet)) + 5.0 * count + err
        return value, agree, log_err

    return loss


def mean_abs_log_error(log_err: np.ndarray, weight: np.ndarray) -> float:
    """The weighted mean |log(model / observed)| of one row of ``_loss_terms``' log errors."""
    return float(np.abs(log_err) @ weight / float(weight.sum()))


def patience_candidates(p99_ms: np.ndarray, slo_ms: float) -> tuple[float, ...]:
    """The clients' patience as the store may show it, seconds, likeliest first; empty if no
    step broke the SLO. Waits stop growing there: the plateau the worst steps' p99 reaches,
    the steps above half the highest (not the single highest, which histogram buckets and
    the service time push past it, nor a bucket bound many steps are clamped to). Their
    median first, then their deciles."""
    seen = p99_ms[np.isfinite(p99_ms)]
    if not over_slo(seen, slo_ms).any():  # no step over the SLO: no timeout to read
        return ()
    plateau = seen[seen >= 0.5 * float(seen.max())]
    out: list[float] = []
    for q in (0.5, 0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9):
        v = float(min(600.0, max(0.1, round(float(np.quantile(plateau, q)) / 1000.0, 1))))
        if v not in out:
            out.append(v)
    return tuple(out)


def weighted_p99(p99_ms: np.ndarray, weights: np.ndarray) -> float:
    """The 99th percentile of step p99s weighted by requests (the backtest's period p99): the
    one weighted percentile, :func:`analytics.measures.weighted_quantile`."""
    return weighted_quantile(p99_ms, weights, 0.99)


def _thin(lam: np.ndarray, rep: np.ndarray, obs: np.ndarray, slo_ms: float
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """About ``MAX_FIT_POINTS`` steps for the grid (fewer than twice that), and their weights.

    Every step that breaks the SLO is kept while there are at most ``MAX_FIT_POINTS`` of them
    (they decide the fit), and a stride of the rest. Past that (an SLO set below the usual
    p99 puts nearly every step above it, and the grid took 30 s on the sample), those steps
    are strided too. Weights are the strides, so the loss's counts stay the whole period's.

    >>> lam = np.arange(40_000.0); obs = np.where(lam % 4 == 0, 50.0, 500.0)
    >>> _, _, kept, w = _thin(lam, lam, obs, 100.0)
    >>> kept.size <= MAX_FIT_POINTS + 2, round(float(w[kept > 100].sum())), round(float(w.sum()))
    (True, 30000, 40000)
    """
    over = over_slo(obs, slo_ms)
    half = MAX_FIT_POINTS // 2
    parts, weights = [], []
    for side, keep_up_to in ((np.flatnonzero(over), MAX_FIT_POINTS), (np.flatnonzero(~over), half)):
        kept = side if side.size <= keep_up_to else side[::max(1, side.size // half)]
        parts.append(kept)
        weights.append(np.full(kept.size, side.size / max(kept.size, 1)))
    keep = np.concatenate(parts)
    return lam[keep], rep[keep], obs[keep], np.concatenate(weights)


def fit_service(rps: np.ndarray, ready: np.ndarray, p99_ms: np.ndarray, slo_ms: float, *,
                step_s: int = 60, timeouts_s: tuple[float, ...] = ()) -> ServiceFit | None:
    """Fit the service's slots, speed, variability, floor and reading noise; ``None``
    without usable steps.

    Stage 1, a grid over (concurrency, cv, replica capacity, floor slowdown) on the steps'
    stable-queue p99: each candidate's latency floor is the median excess of observed over
    queueing p99 on the uncontended steps (load per replica at or below its median), at
    least 0, scaled back by the candidate's slowdown at each step's occupancy.
    Loss = 10 x (1 - balanced accuracy of the model's calls on breaking the SLO)
    + 5 x |model count - observed count| / observed count of steps above the SLO
    + mean of min((log model - log observed)^2, 4): violation minutes first, then the p99
    curve; overloaded model steps count as 10x the SLO.

    The stable curve cannot tell a faster slot with a steeper floor from a slower one (both
    cross the SLO at the same load), but backlogs can: how fast a surge drains is capacity
    less traffic. Stage 2 (with ``timeouts_s``, candidates for the clients' patience,
    likeliest first) replays the steps in order through the queueing core (backlog carried,
    p99 capped at the timeout) for capacities around stage 1's, each with its best slowdown
    and floor, and picks the timeout the same way. There the store's p99 is taken for the
    reading it is: the same load reads above the SLO on one step and below it on the next (an
    exporter's histogram of a minute's requests, bucket bounds, bursts within the minute), and
    a replay that called each step by its own p99 counted every step of a surge hovering at the
    SLO, where the store showed some of them. So each replayed step is over the SLO with the
    chance its reading would be (``over_slo_chance``), under the reading noise that suits the
    candidate best (``NOISE_GRID``; the fit's ``p99_noise_log_sd``, which every policy's
    violation minutes count with), and the calls' part of the loss is the likelihood of the
    store's calls, 10 x -log likelihood / (2 x observed count), in place of the balanced
    accuracy (which, on chances, rewards pushing every step away from the SLO); the count and
    the curve terms stay, and 5 x |log(period p99 model / observed)| (the request-weighted 99th
    percentile of step p99s) is added. When the replay finds noise, the grid's ``RESHAPES``
    best shapes (in latency, concurrency, cv) are judged again on chances under it, and the
    fit with the lower replay loss of the two is kept.
    """
    ok = (rps > 0) & (ready > 0) & np.isfinite(p99_ms) & (p99_ms > 0)
    if ok.sum() < 20:
        return None
    value, fit, ranked = _fit_pass(rps, ready, p99_ms, slo_ms, step_s, timeouts_s, 0.0)
    if fit.p99_noise_log_sd > 0:
        # The grid's shapes were judged on calls; judged on chances under that noise they
        # may rank otherwise (the best few of them). The better of the two by the replay's loss.
        again = _fit_pass(rps, ready, p99_ms, slo_ms, step_s, timeouts_s, fit.p99_noise_log_sd,
                          ranked[:RESHAPES])
        if again[0] < value:
            fit = again[1]
    return fit


def _fit_pass(rps: np.ndarray, ready: np.ndarray, p99_ms: np.ndarray, slo_ms: float, step_s: int,
              timeouts_s: tuple[float, ...], grid_noise_log_sd: float,
              shapes: list[tuple[bool, int, float]] | None = None
              ) -> tuple[float, ServiceFit, list[tuple[bool, int, float]]]:
    """``fit_service`` with the grid's steps over the SLO under ``grid_noise_log_sd`` (0:
    the model's calls), on ``shapes`` (in latency, concurrency, cv; default all): the loss
    of the last stage, the fit, and the shapes best first."""
    ok = (rps > 0) & (ready > 0) & np.isfinite(p99_ms) & (p99_ms > 0)
    lam, rep, obs = rps[ok], ready[ok], p99_ms[ok]
    weight = np.ones(lam.size)
    if lam.size > MAX_FIT_POINTS:
        lam, rep, obs, weight = _thin(lam, rep, obs, slo_ms)
    loss_of = _loss_terms(weight, obs, slo_ms, grid_noise_log_sd)
    per_rep = lam / rep
    hi_load = float(np.quantile(per_rep, 0.999))
    quiet = np.flatnonzero(per_rep <= np.median(per_rep))
    obs_quiet = obs[quiet]
    # The chance of waiting depends on the slots and the replica capacity only: the grid asks
    # for it once per cv and per in-latency choice (18 times), and it is a sixth of the grid.
    pwaits: dict[tuple[int, float], np.ndarray] = {}

    def pwait(conc: int, mu: float) -> np.ndarray:
        key = (conc, mu)
        if key not in pwaits:
            pwaits[key] = erlang_c(rep * conc, lam / mu)
        return pwaits[key]

    def candidates(conc: int, cv: float, cap: float, slowdowns: tuple[float, ...] | np.ndarray,
                   in_latency: bool) -> tuple[float, tuple[Any, ...], float, float]:
        """The best (loss, (mu, conc, cv, floor, slowdown, in_latency), agreement,
        |log error|)."""
        mu = cap / conc
        if not MU_RANGE[0] <= mu <= MU_RANGE[1]:
            return (math.inf, (mu, conc, cv, 0.0, 0.0, in_latency), 0.0, math.inf)
        q0, shift = stable_p99_parts(lam, rep, mu, conc, cv, in_latency, pwait(conc, mu))
        jam = ~np.isfinite(q0)
        occ4 = np.minimum(per_rep / cap, 1.0) ** 4
        ks = np.asarray(slowdowns, dtype=np.float64)
        grow = 1.0 + ks[:, None] * occ4[None, :]  # one row per slowdown
        grow_quiet = grow[:, quiet]
        q_quiet = q0[quiet]
        fin = np.isfinite(q_quiet)
        if fin.all():
            excess = (obs_quiet - q_quiet) / grow_quiet - shift
            floors = np.maximum(np.median(excess, axis=1), 0.0)
        elif fin.any():
            excess = (obs_quiet[fin] - q_quiet[fin]) / grow_quiet[:, fin] - shift
            floors = np.maximum(np.median(excess, axis=1), 0.0)
        else:
            floors = np.zeros(ks.size)
        m = np.where(jam, 10.0 * slo_ms, q0 + (shift + floors[:, None]) * grow)
        value, agree, log_err = loss_of(m)
        i = int(np.argmin(value))
        return (float(value[i]), (mu, conc, cv, float(floors[i]), float(ks[i]), in_latency),
                float(agree[i]), mean_abs_log_error(log_err[i], weight))

    shapes = shapes or [(measured, conc, cv) for measured in (True, False)
                        for conc in CONCURRENCY_GRID for cv in CV_GRID]
    by_shape = {shape: min((candidates(shape[1], shape[2], cap, SLOWDOWN_GRID, shape[0])
                            for cap in hi_load * np.geomspace(0.7, 6.0, CAPACITY_POINTS)),
                           key=lambda t: t[0]) for shape in shapes}
    best = min(by_shape.values(), key=lambda t: t[0])
    ranked = sorted(by_shape, key=lambda shape: by_shape[shape][0])
    # Refine the replica capacity around the best: the SLO knee is sharp.
    mu0, conc0, measured0 = best[1][0], best[1][1], best[1][5]
    best = min([best] + [candidates(conc0, cv, cap, SLOWDOWN_GRID, measured0) for cv in CV_GRID
                         for cap in mu0 * conc0 * np.linspace(0.92, 1.08, 17)],
               key=lambda t: t[0])
    timeout, noise = None, 0.0
    if timeouts_s:
        best, timeout, noise = _refine_by_replay(best, rps, ready, p99_ms, slo_ms, step_s,
                                                 timeouts_s, candidates)
    value, (mu, conc, cv, floor, k, measured), agree, mae = best[:4]
    return value, ServiceFit(float(mu), int(conc), float(cv), float(floor), float(k),
                             bool(measured), timeout, int(lam.size), agree, mae, noise), ranked


def _refine_by_replay(best: Any, rps: np.ndarray, ready: np.ndarray, p99_ms: np.ndarray,
                      slo_ms: float, step_s: int, timeouts_s: tuple[float, ...],
                      candidates: Callable[..., Any]) -> tuple[Any, float, float]:
    """Stage 2 of ``fit_service``: capacity, then timeout, chosen by replaying the steps in
    order, each with the reading noise that suits it; returns the best candidate, timeout
    and noise (0 when the least of ``NOISE_GRID`` suits it best)."""
    mu0, conc, cv, measured = best[1][0], best[1][1], best[1][2], best[1][5]
    seen = (rps > 0) & (ready > 0) & np.isfinite(p99_ms) & (p99_ms > 0)
    obs = p99_ms[seen]
    weights = rps * step_s
    obs_p99 = weighted_p99(np.where(seen, p99_ms, np.nan), weights)
    loss_of = _loss_terms(np.ones(obs.size), obs, slo_ms, np.asarray(NOISE_GRID)[:, None])
    slowdowns = np.arange(0.0, 30.01, 0.5)

    def replay(params: tuple[Any, ...], timeout_s: float) -> tuple[Any, ...]:
        mu, floor, k = params[0], params[3], params[4]
        if not MU_RANGE[0] <= mu <= MU_RANGE[1]:
            return math.inf, params, 0.0, math.inf, 0.0
        lat = step_latency(rps, ready * conc, mu, step_s=step_s, slo_s=slo_ms / 1000.0,
                           timeout_s=timeout_s, cv=cv, floor_s=floor / 1000.0,
                           busy_slowdown=k, service_in_latency=measured)
        model = lat.p99_s * 1000.0
        values, agrees, log_err = loss_of(model[seen])  # a row per noise
        i = int(np.argmin(values))
        value, agree = float(values[i]), float(agrees[i])
        model_p99 = weighted_p99(np.where(seen, model, np.nan), weights)
        value += P99_WEIGHT * abs(math.log(max(model_p99, 1e-9) / obs_p99))
        mae = mean_abs_log_error(log_err[0], np.ones(obs.size))
        return value, params, agree, mae, 0.0 if i == 0 else NOISE_GRID[i]

    # Each capacity with the slowdown and floor the stable curve likes best for it.
    top = min((replay(candidates(conc, cv, cap, slowdowns, measured)[1], timeouts_s[0])
               for cap in mu0 * conc * np.geomspace(0.55, 1.45, REPLAY_POINTS)),
              key=lambda t: t[0])
    timeout = timeouts_s[0]
    for t in timeouts_s[1:]:
        other = replay(top[1], t)
        if other[0] < top[0]:
            top, timeout = other, t
    return top, timeout, top[4]


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


def replica_cap(rps: np.ndarray, desired: np.ndarray, rps_per_replica: float | None,
                min_steps: int = 10) -> int | None:
    """The autoscaler's maximum, when the data shows one: the most desired replicas, held
    while traffic asked for more (traffic over that count above ``rps_per_replica``, the
    traffic one desired replica stands for) on at least ``min_steps`` steps; else ``None``
    (the autoscaler never met its maximum, whatever it is).
    """
    if rps_per_replica is None or rps_per_replica <= 0 or desired.size == 0:
        return None
    top = float(np.nanmax(desired))
    if not np.isfinite(top) or top <= 0:
        return None
    # Traffic beyond one more replica's worth: the autoscaler would have asked for more.
    wanting = (np.abs(desired - top) < 1e-9) & (rps > top * rps_per_replica * 1.1)
    return int(round(top)) if int(wanting.sum()) >= min_steps else None


def ready_cap(ready: np.ndarray, desired: np.ndarray, room: np.ndarray,
              min_steps: int = 10) -> int | None:
    """The autoscaler's maximum where its metrics are missing (``desired`` inferred from
    traffic, which nothing caps): the most ready replicas, held while the inferred desired
    count asked for more and a free GPU could have placed another (``room``: not a shortage
    of GPUs) on at least ``min_steps`` steps; else ``None``.

    >>> ready = np.array([4, 8, 12, 12, 12, 12, 12, 9], dtype=float)
    >>> desired = np.array([4, 8, 14, 20, 20, 18, 16, 9], dtype=float)
    >>> ready_cap(ready, desired, np.ones(8, bool), min_steps=4)
    12
    >>> ready_cap(ready, desired, np.zeros(8, bool), min_steps=4) is None  # no GPU free: a shortage
    True
    """
    if ready.size == 0 or not np.isfinite(ready).any():
        return None
    top = float(np.nanmax(ready))
    if top <= 0:
        return None
    held = (np.abs(ready - top) < 1e-9) & (desired > top) & room
    return int(round(top)) if int(held.sum()) >= min_steps else None
