"""One definition per number that more than one page, the CLI or the what-if backtest shows.

A capacity review stops trusting a tool the moment two pages disagree, so the numbers they
share are defined here once and every caller goes through these functions:

- **minutes over the SLO**: a step counts when its p99 is known and above the service's SLO;
  a step without requests (no p99) is not over (it is unknown, never a violation); minutes are
  the steps counted times the step length. For a pool, a step counts once however many of
  its services are over (:func:`minutes_over_slo_any`). A model's minutes over the SLO are
  the same count in expectation: each modelled step counts with the chance that its p99
  *reading* is over the SLO (:func:`over_slo_chance`), since an exporter's p99 scatters around
  the latency curve a model draws, and a step at the SLO reads over about half the time.
  Steps become minutes one way (:func:`step_minutes`), and a step's violation is split between
  the teams that caused it one way (:func:`split_violation_by_team`): the what-if's externality,
  its ledger by period and the Chargeback page's bills all read that split.
- **batch GPU-hours held**: GPUs batch held at each step times the step length.
- **pool size**: the most GPUs the pool had at any step of the range (:func:`pool_size`).
- **warm-up** of a replica: the median lag from a scale-up the free GPUs could place at once
  to the replicas being ready (:func:`warmup_steps`, desired to ready); where the data shows no
  such scale-up, the mean time a replica holds its GPUs before it is ready (:func:`loading_steps`,
  scheduled to ready, by Little's law);
- **autoscaler reaction**: how many steps the autoscaler's desired replicas follow the traffic's
  rises by (:func:`reaction_steps`);
- **GPUs per replica**: the median of a service's held GPUs over its ready replicas
  (:func:`gpus_per_replica`);
- **desired replicas where no autoscaler is linked**: inferred from traffic with the load per
  replica of uncontended, settled steps (:func:`infer_desired`).
- **the best policy** of a pool: one decision for every service on it, judged by one rule
  (:func:`best_policy`): the fewest whole minutes over the SLO summed over the pool's services,
  each against its own SLO (:func:`pool_outcomes`), ties to the least batch work forgone, then
  to the cheaper, then to the earlier name. The What-if page, Chargeback, the capacity review
  and ``tidelens whatif``/``review`` read it from here (a single service is a pool of one).

>>> import numpy as np
>>> over_slo(np.array([50.0, 150.0, np.nan]), 100.0).tolist()
[False, True, False]
>>> minutes_over_slo(np.array([50.0, 150.0, np.nan, 120.0]), 100.0, step_s=60)
2.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl


def over_slo(p99_ms: np.ndarray, slo_ms: float) -> np.ndarray:
    """Per step: the p99 is known and above the SLO (a step without requests is not)."""
    # A NaN compares false: no copy without its NaNs is needed.
    return np.asarray(p99_ms, dtype=np.float64) > float(slo_ms)


def over_slo_chance(p99_ms: np.ndarray, slo_ms: float,
                    noise_log_sd: float | np.ndarray = 0.0) -> np.ndarray:
    """Per step: the chance the p99 an exporter reads is over the SLO, where ``p99_ms`` is a
    model's and readings scatter around it with ``noise_log_sd`` (the standard deviation of
    log(read / modelled), log-normal); 0 for a step without a p99. Without noise it is
    :func:`over_slo` as 0 or 1. An array of noises (all above 0) broadcasts against the steps.

    >>> over_slo_chance(np.array([50.0, 100.0, 150.0, np.nan]), 100.0).tolist()
    [0.0, 0.0, 1.0, 0.0]
    >>> over_slo_chance(np.array([90.0, 100.0, 110.0, np.inf]), 100.0, 0.1).round(2).tolist()
    [0.15, 0.5, 0.83, 1.0]
    """
    p = np.asarray(p99_ms, dtype=np.float64)
    sd = np.asarray(noise_log_sd, dtype=np.float64)
    if not np.any(sd > 0):
        return over_slo(p, slo_ms).astype(np.float64)
    from scipy.special import ndtr  # the normal CDF; scipy comes with statsmodels

    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.log(np.nan_to_num(p, nan=0.0)) - np.log(float(slo_ms))) / sd
    return ndtr(z)


def step_minutes(steps: float | np.ndarray, *, step_s: int) -> float | np.ndarray:
    """Minutes of ``steps`` steps of ``step_s`` seconds: a count of steps, a sum of per-step
    chances, or an array of either. The one conversion from steps to minutes.

    >>> step_minutes(3, step_s=300), step_minutes(np.array([0.5, 1.0]), step_s=60).tolist()
    (15.0, [0.5, 1.0])
    """
    return steps * (step_s / 60.0)


def whole_steps_range(lo_min: float, hi_min: float, *, step_s: int) -> tuple[float, float]:
    """A range of minutes over the SLO out to whole steps (its low end down, its high end up):
    the store counts whole steps over the SLO, a replay's minutes are expectations.

    >>> whole_steps_range(7.2, 12.1, step_s=300)
    (5.0, 15.0)
    """
    step_min = float(step_minutes(1, step_s=step_s))
    return (float(step_minutes(np.floor(lo_min / step_min + 1e-9), step_s=step_s)),
            float(step_minutes(np.ceil(hi_min / step_min - 1e-9), step_s=step_s)))


def over_slo_label(scope: str, *, modelled: bool, period: str = "") -> str:
    """The label of a number of minutes over the SLO, naming what it counts: which services
    (``scope``), observed or modelled, and over which ``period`` when the label is read away
    from its range. Minutes over the SLO of different scopes are different numbers; a label
    without its scope reads as a contradiction beside another.

    >>> over_slo_label("any service", modelled=False)
    'Minutes over the SLO, any service, observed'
    >>> over_slo_label("chat-vllm", modelled=True, period="last 7 days")
    'Minutes over the SLO, chat-vllm, modelled, last 7 days'
    """
    return f"Minutes over the SLO, {scope}, {'modelled' if modelled else 'observed'}" + (f", {period}" if period else "")


def minutes_over_slo(p99_ms: np.ndarray, slo_ms: float, *, step_s: int) -> float:
    """Minutes of steps over the SLO (:func:`over_slo`) at ``step_s`` seconds a step."""
    return float(step_minutes(float(over_slo(p99_ms, slo_ms).sum()), step_s=step_s))


def split_violation_by_team(violation: np.ndarray, blame_by_team: Mapping[str, np.ndarray]
                            ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each step's violation (0/1, or the chance it reads over) split between the teams that
    caused it: a team's part is the violation times its blame weight at that step (teams in
    name order), and what no team caused (never below zero) is the serving team's own.

    Returns ``(parts by team, own)``, per step.

    >>> parts, own = split_violation_by_team(np.array([1.0, 1.0, 0.0]),
    ...                                      {"ml": np.array([0.5, 0.0, 1.0]), "etl": np.array([0.25, 0.0, 0.0])})
    >>> {t: p.tolist() for t, p in parts.items()}, own.tolist()
    ({'etl': [0.25, 0.0, 0.0], 'ml': [0.5, 0.0, 0.0]}, [0.25, 1.0, 0.0])
    """
    v = np.asarray(violation, dtype=np.float64)
    parts: dict[str, np.ndarray] = {}
    charged = np.zeros_like(v)
    for team, weight in sorted(blame_by_team.items()):
        parts[team] = v * weight
        charged += parts[team]
    return parts, (v - charged).clip(min=0.0)


def over_slo_expr(slo_col: str = "slo_ms", p99_col: str = "p99_ms") -> pl.Expr:
    """:func:`over_slo` as a polars expression over a frame with both columns."""
    return (pl.col(p99_col).fill_nan(None) > pl.col(slo_col)).fill_null(False)


def minutes_over_slo_any(steps: pl.DataFrame, *, step_s: int) -> float:
    """A pool's minutes over the SLO: steps (``ts``) where any service is over (``violating``)."""
    if steps.height == 0:
        return 0.0
    return float(step_minutes(float(steps.filter(pl.col("violating"))["ts"].n_unique()), step_s=step_s))


class PolicyOutcome(Protocol):
    """What :func:`best_policy` reads of a policy's outcome: one service's replay
    (:class:`analytics.whatif.outputs.PolicySummary`) or a pool's (:class:`PoolOutcome`)."""

    @property
    def violation_minutes(self) -> float: ...

    @property
    def batch_lost_gpu_hours(self) -> float: ...

    @property
    def batch_unfinished_gpu_hours(self) -> float: ...

    @property
    def cost_total(self) -> float: ...


@dataclass(frozen=True)
class PoolOutcome:
    """One policy's outcome for a whole pool (:func:`pool_outcomes`): what :func:`best_policy`
    judges a pool by."""

    violation_minutes: float  # every service's minutes over its own SLO, summed
    violation_minutes_by_service: dict[str, float]  # the breakdown, adding up to the above
    batch_lost_gpu_hours: float  # of the service replay that forgoes the most batch work
    batch_unfinished_gpu_hours: float
    cost_total: float  # the dearest of the replays' GPU cost


def pool_outcomes(by_service: Mapping[str, Mapping[str, PolicyOutcome]]) -> dict[str, PoolOutcome]:
    """Each policy's outcome for the pool, from each service's replay of it (``service ->
    policy -> outcome``): the policies every service was replayed under, in the first service's
    order.

    The minutes are added: each service's minutes over its own SLO (a minute two services are
    both over counts twice: each is a promise broken to its own users), so the per-service rows
    add up to the pool's. Every service's replay models the same pool and the same batch runs
    from that service's side (the other services' GPUs held as observed), so the batch work
    forgone (lost and left unfinished) and the GPU cost are the largest any replay shows: the
    figure a pool owner has to defend.

    >>> from types import SimpleNamespace as S
    >>> def o(m, lost=0.0, cost=100.0):
    ...     return S(violation_minutes=m, batch_lost_gpu_hours=lost, batch_unfinished_gpu_hours=0.0, cost_total=cost)
    >>> out = pool_outcomes({"chat": {"shared": o(40.0), "mig": o(10.0, 3.0)},
    ...                      "rec": {"shared": o(20.0), "mig": o(25.0, 1.0, 90.0)}})
    >>> {p: (x.violation_minutes, x.batch_lost_gpu_hours, x.cost_total) for p, x in out.items()}
    {'shared': (60.0, 0.0, 100.0), 'mig': (35.0, 3.0, 100.0)}
    >>> out["mig"].violation_minutes_by_service
    {'chat': 10.0, 'rec': 25.0}
    """
    if not by_service:
        return {}
    names = list(by_service)
    policies = [p for p in by_service[names[0]] if all(p in by_service[s] for s in names)]
    out: dict[str, PoolOutcome] = {}
    for p in policies:
        each = {s: by_service[s][p] for s in names}
        worst = max(names, key=lambda s: (_forgone(each[s]), s))
        out[p] = PoolOutcome(
            violation_minutes=float(sum(float(x.violation_minutes) for x in each.values())),
            violation_minutes_by_service={s: float(x.violation_minutes) for s, x in each.items()},
            batch_lost_gpu_hours=float(each[worst].batch_lost_gpu_hours),
            batch_unfinished_gpu_hours=float(each[worst].batch_unfinished_gpu_hours),
            cost_total=float(max(float(x.cost_total) for x in each.values())))
    return out


def _forgone(x: PolicyOutcome) -> float:
    """Batch work a policy forgoes: GPU-hours thrown away (evictions, interruptions) and left
    unfinished at the period's end."""
    return float(x.batch_lost_gpu_hours) + float(x.batch_unfinished_gpu_hours)


def best_policy(outcomes: Mapping[str, PolicyOutcome]) -> str | None:
    """The pool's best policy: the fewest whole minutes over the SLO (for a pool, every
    service's minutes over its own SLO summed: :func:`pool_outcomes`); ties to the least batch
    work forgone (whole GPU-hours lost and left unfinished), then to the lower ``cost_total``,
    then to the earlier name. ``None`` for no policies.

    Why this order: a minute over the SLO is a promise broken to a service's users, which the
    serving team answers for, whichever service it is; among policies that break as many,
    the one that keeps more of the batch team's work costs the pool less than the GPU bill
    says (work lost is redone on GPUs the bill counts again), and money decides only what is
    equal to both teams. Whole minutes and whole GPU-hours: a modelled fraction of one (a
    step's chance of reading over) is no lead.

    >>> from types import SimpleNamespace as S
    >>> def o(m, cost, forgone=0.0):
    ...     return S(violation_minutes=m, cost_total=cost, batch_lost_gpu_hours=forgone, batch_unfinished_gpu_hours=0.0)
    >>> best_policy({"shared": o(10.4, 500.0), "partitioned": o(10.2, 900.0)})
    'shared'
    >>> best_policy({"partitioned": o(3.4, 600.0, 36.2), "tidal": o(3.2, 900.0, 5.0)})
    'tidal'
    >>> best_policy({"b": o(3.0, 1.0), "a": o(3.0, 1.0)})
    'a'
    """
    if not outcomes:
        return None
    return min(outcomes, key=lambda n: (round(float(outcomes[n].violation_minutes)),
                                        round(_forgone(outcomes[n])),
                                        float(outcomes[n].cost_total), n))


def minutes_over_slo_by_service(steps: pl.DataFrame, *, step_s: int) -> dict[str, float]:
    """Each service's minutes over the SLO from its steps (``service``, ``violating``), in
    service order: :func:`minutes_over_slo` per service."""
    if steps.height == 0:
        return {}
    counts = steps.group_by("service").agg(pl.col("violating").sum()).sort("service")
    return {str(s): float(step_minutes(float(n), step_s=step_s)) for s, n in counts.iter_rows()}


def weighted_quantile_rows(values: np.ndarray, weights: np.ndarray, q: float = 0.99) -> np.ndarray:
    """Per row, the smallest value with at least ``q`` of the row's weight at or below it: the
    rank rule of Prometheus' ``histogram_quantile`` (the first bucket whose cumulative count
    reaches ``q * N``), on the weighted values themselves; nan for a row without weight. Whole
    weights make every running sum exact: a row is read from its top values where they hold the
    quantile (the simulator's 200 draws a minute: 6x faster than sorting them all).

    >>> weighted_quantile_rows(np.array([[3.0, 1.0, 2.0]]), np.array([[1.0, 98.0, 1.0]])).tolist()
    [2.0]
    """
    k = values.shape[1]
    m = max(8, int(np.ceil(2 * (1 - q) * k)) + 2)  # twice the tail's share of the values
    if 2 * m > k or weights.dtype.kind not in "iu":
        return _sorted_quantile_rows(values, weights, q)
    top = np.argpartition(values, k - m, axis=1)[:, k - m:]
    top_w = np.take_along_axis(weights, top, axis=1)
    total = weights.sum(axis=1)
    below = total - top_w.sum(axis=1)
    out = _sorted_quantile_rows(np.take_along_axis(values, top, axis=1), top_w, q, below)
    short = np.flatnonzero(below >= q * total.astype(np.float64))  # or no weight
    out[short] = _sorted_quantile_rows(values[short], weights[short], q)
    return out


def _sorted_quantile_rows(values: np.ndarray, weights: np.ndarray, q: float, below: np.ndarray | None = None) -> np.ndarray:
    order = np.argsort(values, axis=1, kind="stable")
    xs = np.take_along_axis(values, order, axis=1).astype(np.float64)
    cum = np.cumsum(np.take_along_axis(weights, order, axis=1), axis=1) + (0 if below is None else below[:, None])
    total = cum[:, -1]
    idx = np.minimum((cum < q * total.astype(np.float64)[:, None]).sum(axis=1), values.shape[1] - 1)
    return np.where(total > 0, xs[np.arange(len(xs)), idx], np.nan)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float = 0.99) -> float:
    """:func:`weighted_quantile_rows` of one series, its unknown values and weightless steps
    left out (nan when none is left).

    >>> weighted_quantile(np.array([50.0, np.nan, 900.0, 60.0]), np.array([90.0, 5.0, 1.0, 9.0]))
    60.0
    """
    v, w = np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(v) & (w > 0)
    if not ok.any():
        return float("nan")
    return float(weighted_quantile_rows(v[ok][None, :], w[ok][None, :], q)[0])


def pool_size(gpus_total: np.ndarray) -> float:
    """The most GPUs the pool had at any step (0 for no steps)."""
    g = np.asarray(gpus_total, dtype=np.float64)
    return float(np.nanmax(g)) if g.size and np.isfinite(g).any() else 0.0


def gpu_hours(gpus: np.ndarray, *, step_s: int) -> float:
    """GPU-hours of per-step GPU counts (GPUs held or in the pool) at ``step_s`` a step."""
    return float(np.nansum(np.asarray(gpus, dtype=np.float64))) * step_s / 3600.0


def gpu_hours_held(gpus: float, minutes: float) -> float:
    """:func:`gpu_hours` of ``gpus`` held for ``minutes`` (one run's stint, in a simulation).

    >>> gpu_hours_held(8, 90)
    12.0
    """
    return float(gpus) * float(minutes) / 60.0


def gpu_hours_expr(col: str, *, step_s: int) -> pl.Expr:
    """:func:`gpu_hours` as a polars aggregation of column ``col`` (nulls left out)."""
    return pl.col(col).sum() * (step_s / 3600.0)


def warmup_steps(desired: np.ndarray, ready: np.ndarray, idle_gpus: np.ndarray,
                 gpus_per_replica: float, max_steps: int = 120) -> int | None:
    """Median steps from a scale-up the free GPUs could place at once to ready >= desired
    (:func:`warmup_lags`); ``None`` when the data shows no such scale-up.

    >>> warmup_steps(np.r_[1, 1, 3, 3, 3, 3], np.r_[1, 1, 1, 1, 3, 3], np.full(6, 4.0), 1.0)
    2
    """
    lags = warmup_lags(desired, ready, idle_gpus, gpus_per_replica, max_steps)
    return int(np.median(lags)) if lags else None


def warmup_lags(desired: np.ndarray, ready: np.ndarray, idle_gpus: np.ndarray,
                gpus_per_replica: float, max_steps: int = 120) -> list[int]:
    """Steps from each scale-up the free GPUs could place at once to ready >= desired.

    Only requests the pool could place when they were made count (the GPUs free the step
    before the autoscaler asked): what they measure is warm-up alone.

    >>> warmup_lags(np.r_[1, 1, 3, 3, 5, 5, 5], np.r_[1, 1, 1, 1, 3, 3, 5], np.full(7, 4.0), 1.0)
    [2, 2]
    """
    desired = np.nan_to_num(np.asarray(desired, float))
    ready = np.nan_to_num(np.asarray(ready, float))
    idle = np.nan_to_num(np.asarray(idle_gpus, float))
    rises = np.flatnonzero((np.diff(desired) > 0) & (desired[1:] > ready[1:])) + 1
    lags = []
    for i in rises.tolist():
        need = desired[i] - ready[i]
        if idle[i - 1] + 1e-9 < need * gpus_per_replica:
            continue
        hit = np.flatnonzero(ready[i:i + max_steps + 1] >= desired[i] - 1e-9)
        if hit.size and hit[0] > 0:
            lags.append(int(hit[0]))
    return lags


def loading_steps(held_replicas: np.ndarray, ready: np.ndarray) -> tuple[float, int] | None:
    """Mean steps a replica holds its GPUs before it is ready (scheduled to ready), and how many
    replicas became ready: Little's law over the range, the replicas loading (holding GPUs, not
    yet ready) summed over the steps, over the replicas that became ready (the rises of the
    ready count). ``None`` when none became ready or none was seen loading.

    A replica deleted while it loads counts as loading and never as ready, so this errs long.

    >>> loading_steps(np.r_[2, 4, 4, 4, 4, 4], np.r_[2, 2, 2, 2, 4, 4])
    (3.0, 2)
    """
    held = np.nan_to_num(np.asarray(held_replicas, float))
    ready = np.nan_to_num(np.asarray(ready, float))
    loading = np.clip(held - ready, 0.0, None)
    became = float(np.clip(np.diff(ready), 0.0, None).sum())
    if became < 1.0 or not loading.sum() > 0:
        return None
    return round(float(loading.sum()) / became, 3), int(round(became))


def reaction_steps(rps: np.ndarray, desired: np.ndarray, max_steps: int = 10) -> int | None:
    """Steps the autoscaler's desired replicas follow the traffic's rises by: the lag (0 to
    ``max_steps``) of the largest cross-correlation (statsmodels' ``ccf``) between the desired
    replicas' rises and the traffic's (positive first differences). ``None`` when either never
    rose or none correlates positively.

    >>> t = np.r_[np.full(10, 10.0), np.full(10, 30.0), np.full(10, 60.0)]
    >>> reaction_steps(t, np.ceil(np.roll(t, 2) / 10))
    2
    """
    up_t = np.clip(np.diff(np.nan_to_num(np.asarray(rps, float))), 0.0, None)
    up_d = np.clip(np.diff(np.nan_to_num(np.asarray(desired, float))), 0.0, None)
    if up_t.size < 3 or not up_d.any() or not up_t.any():
        return None
    from statsmodels.tsa.stattools import ccf  # heavy import, only here

    c = ccf(up_d, up_t, adjusted=False, nlags=min(max_steps, up_t.size - 1) + 1)
    return int(np.argmax(c)) if np.nanmax(c) > 0 else None


def gpus_per_replica(own_gpus: np.ndarray, ready: np.ndarray) -> float | None:
    """GPUs one replica holds: the median of the service's GPUs over its ready replicas, on the
    steps with both (``None`` without any: the caller's default, 1, stands).

    >>> gpus_per_replica(np.array([2.0, 4.0, 0.0, 4.0]), np.array([1.0, 2.0, 1.0, 0.0]))
    2.0
    """
    own = np.asarray(own_gpus, float)
    ready = np.asarray(ready, float)
    ok = (ready > 0) & (own > 0) & np.isfinite(own) & np.isfinite(ready)
    if not ok.any():
        return None
    v = float(np.median(own[ok] / ready[ok]))
    return v if np.isfinite(v) and v > 0 else None


@dataclass(frozen=True)
class InferredDemand:
    """Desired replicas inferred from traffic where no autoscaler signal is linked."""

    rps_per_replica: float
    min_replicas: float
    fitted_steps: int
    max_replicas: float | None = None

    def describe(self) -> str:
        most = f", at most {self.max_replicas:g}" if self.max_replicas is not None else ""
        return (f"desired replicas inferred from traffic: {self.rps_per_replica:.3g} requests/s per replica "
                f"(at least {self.min_replicas:g}{most}), fitted on {self.fitted_steps} uncontended steps")


def infer_desired(rps: np.ndarray, ready: np.ndarray, idle_gpus: np.ndarray, gpr: float,
                  settle_steps: int, quantile: float = 0.95, *, cap_at_most_ready: bool = True
                  ) -> tuple[np.ndarray, InferredDemand] | None:
    """What an autoscaler would have asked for, from traffic, where the data has no HPA signal.

    An HPA keeps about ``rps / k`` replicas for a target load ``k`` per replica. ``k`` is read off
    the steps where the autoscaler evidently got what it wanted: free GPUs for another replica,
    and the ready replicas unchanged for ``settle_steps`` (no replica warming). There the load
    per replica sits just under ``k`` (the HPA rounds up, and keeps replicas through its
    scale-down window), so ``k`` is a high ``quantile`` of ``rps / ready`` over those steps above
    the floor (the fewest ready replicas seen there: the HPA's minimum). The desired replicas are
    then ``max(floor, ceil(rps / k))``, and at most the most replicas the service ever had ready:
    an autoscaler has a maximum, at least that, which traffic alone cannot show. Without the
    ceiling a surge would ask for replicas no autoscaler would have asked for, and capacity
    "without batch" would count GPUs the service could never have used. ``cap_at_most_ready=False``
    leaves the demand uncapped, for a caller that reads the autoscaler's maximum itself from
    where demand outran the ready replicas with GPUs free (the what-if's
    :func:`analytics.whatif.fit.ready_cap`).

    Returns ``None`` when fewer than 30 such steps exist (nothing to learn the relation from).

    >>> rps = np.r_[np.full(60, 10.0), np.full(60, 40.0)]
    >>> ready = np.r_[np.full(60, 1.0), np.full(60, 4.0)]
    >>> d, how = infer_desired(rps * 1.5, ready, np.full(120, 8.0), 1.0, 5)
    >>> float(how.rps_per_replica), float(d[-1])
    (15.0, 4.0)
    >>> d, how = infer_desired(np.r_[rps, 100.0] * 1.5, np.r_[ready, 4.0], np.full(121, 8.0), 1.0, 5)
    >>> float(d[-1]), how.max_replicas  # 150 req/s would be 10 replicas; it never had more than 4
    (4.0, 4.0)
    """
    rps = np.nan_to_num(np.asarray(rps, float))
    ready = np.nan_to_num(np.asarray(ready, float))
    idle = np.nan_to_num(np.asarray(idle_gpus, float))
    w = max(int(settle_steps), 1)
    steady = np.zeros(ready.size, bool)
    if ready.size > w:
        same = pl.Series(ready).rolling_max(w + 1).to_numpy() == pl.Series(ready).rolling_min(w + 1).to_numpy()
        steady = np.nan_to_num(same.astype(float)).astype(bool)
    ok = steady & (idle >= gpr - 1e-9) & (ready > 0) & (rps > 0)
    if ok.sum() < 30:
        return None
    floor = float(ready[ok].min())
    above = ok & (ready > floor)
    pick = above if above.sum() >= 30 else ok
    k = float(np.quantile(rps[pick] / ready[pick], quantile))
    if not k > 0:
        return None
    ceiling = max(float(ready.max()), floor) if cap_at_most_ready else None
    desired = np.maximum(floor, np.ceil(rps / k - 1e-9))
    if ceiling is not None:
        desired = np.minimum(desired, ceiling)
    return desired, InferredDemand(rps_per_replica=k, min_replicas=floor, fitted_steps=int(pick.sum()),
                                   max_replicas=ceiling)
