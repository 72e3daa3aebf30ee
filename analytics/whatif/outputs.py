"""What the what-if model reports per policy: latency, SLO, utilization, batch, cost, blame.

``simulate`` runs one policy on one scenario and returns a ``PolicyResult``: per-step series
(p99 over time, replicas, holdings) and a :class:`PolicySummary` whose field names are the
one spelling of each number (``tidelens whatif --json`` writes its :meth:`PolicySummary.as_dict`). The **externality** ledger prices each violation minute and
charges it to the team whose workload caused it (the serving team itself when nobody else
did).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import polars as pl

from analytics.errors import ConfigError
from analytics.measures import gpu_hours, over_slo_chance, split_violation_by_team, step_minutes
from analytics.whatif.params import PoolScenario
from analytics.whatif.policies import POLICIES, CapacityTrace, capacity, reservation
from analytics.whatif.queueing import StableMemo, max_arrival_within_slo, step_latency

# Fields of ``PolicyResult.summary`` the CLI's table shows (the JSON has them all).
SUMMARY_KEYS: tuple[str, ...] = (
    "slo_compliance", "slo_compliance_minutes", "violation_minutes", "p99_ms",
    "worst_minute_p99_ms", "pool_utilization", "pool_utilization_active", "batch_gpu_hours",
    "batch_goodput_gpu_hours", "externality_cost",
)


@dataclass(frozen=True)
class PolicySummary:
    """What one policy's replay came to: the numbers the policy table, the review, the backtest
    and ``tidelens whatif --json`` show, each under its one name. Minutes over the SLO are
    expectations (a step counts with the chance its p99 reads over, :mod:`analytics.measures`);
    ``None`` where nothing was there to measure (no run finished, none interrupted)."""

    slo_compliance: float  # share of requests served within the SLO
    slo_compliance_minutes: float  # share of busy steps not over the SLO
    violation_minutes: float
    p99_ms: float  # over the whole period
    worst_minute_p99_ms: float
    median_minute_p99_ms: float
    pool_utilization: float  # GPU-hours held by anything / the pool's
    pool_utilization_active: float  # serving slots busy plus batch held / the pool's
    batch_gpu_hours: float
    batch_goodput_gpu_hours: float
    batch_lost_gpu_hours: float
    batch_work_gpu_hours: float
    batch_unfinished_gpu_hours: float
    batch_runs_unfinished: int
    queue_delay_median_h: float | None
    queue_delay_max_h: float | None
    batch_jobs_submitted: int
    batch_jobs_completed: int
    mean_job_completion_h: float | None
    max_job_completion_h: float | None
    batch_interruptions: int
    checkpoint_interval_min: dict[str, float | None]  # per job
    mean_interruption_interval_min: float | None
    failed_requests: float
    inference_gpu_hours: float
    useful_gpu_hours: float
    cost_reserved: float
    cost_spot: float
    cost_on_demand: float
    cost_total: float
    cost_per_useful_gpu_hour: float | None
    violation_cost: float
    externality_cost: float  # violation minutes charged to teams other than the service's
    mig_profile: str | None
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The summary as ``tidelens whatif --json`` writes it: every field, in order."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["checkpoint_interval_min"] = dict(self.checkpoint_interval_min)
        out["notes"] = list(self.notes)
        return out


@dataclass
class PolicyResult:
    """One policy replayed on one scenario.

    ``series`` holds per-step arrays (``ts_ms``, ``traffic_rps``, ``p99_ms``,
    ``desired_replicas``, ``ready_replicas``, ``inference_gpus``, ``batch_gpus``,
    ``allocated_gpus``, ``within_slo_share``, ``failed_requests``, ``violation`` (the chance
    the step's p99 reads over the SLO: 0 or 1 without the service's reading noise));
    ``externality`` rows are ``{"team", "violation_minutes", "cost"}``; ``jobs`` one row per
    batch job instance.
    """

    policy: str
    series: dict[str, np.ndarray]
    summary: PolicySummary
    externality: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    trace: CapacityTrace | None = None

    def frame(self) -> pl.DataFrame:
        """Per-step series as a DataFrame (``ts`` as UTC datetime)."""
        cols = dict(self.series)
        df = pl.DataFrame(cols)
        return df.with_columns(pl.from_epoch(pl.col("ts_ms"), time_unit="ms")
                               .dt.replace_time_zone("UTC").alias("ts"))


def simulate(scenario: PoolScenario, policy: str) -> PolicyResult:
    """Replay ``scenario``'s demand under ``policy``.

    Parameters
    ----------
    scenario:
        Traffic per step and the service, batch and pool parameters.
    policy:
        One of ``POLICIES``.

    Returns
    -------
    PolicyResult
        Series, summary (the CLI's keys), externality ledger and batch job outcomes.
    """
    scenario.validate()
    tr = capacity(scenario, policy)
    return _result(scenario, tr)


def compare(scenario: PoolScenario, policies: tuple[str, ...] | list[str] = POLICIES
            ) -> dict[str, PolicyResult]:
    """``simulate`` for each policy, on the same demand."""
    scenario.validate()
    memo = StableMemo(scenario.steps)
    return {p: _result(scenario, capacity(scenario, p), memo) for p in policies}


def _result(scn: PoolScenario, tr: CapacityTrace, memo: StableMemo | None = None
            ) -> PolicyResult:
    svc, pool = scn.service, scn.pool
    step_h = scn.step_s / 60.0 / 60.0
    lam = scn.traffic_rps
    lat = step_latency(lam, tr.servers, tr.mu_rps, step_s=scn.step_s,
                       slo_s=svc.slo_ms / 1000.0, timeout_s=svc.timeout_s, cv=svc.service_cv,
                       floor_s=svc.latency_floor_ms / 1000.0,
                       busy_slowdown=svc.busy_slowdown,
                       service_in_latency=svc.service_in_latency, memo=memo)
    p99_ms = lat.p99_s * 1000.0
    busy = lat.arrivals > 0
    # The chance each step's p99 reads over the SLO (0/1 without reading noise): the model's
    # violation minutes count what the store would show, the one definition's expectation.
    violation = np.where(busy, over_slo_chance(p99_ms, svc.slo_ms, svc.p99_noise_log_sd), 0.0)
    total_req = float(lat.arrivals.sum())
    within_share = np.where(busy, lat.within_slo / np.maximum(lat.arrivals, 1e-12), 1.0)
    n_busy = int(busy.sum())

    # Utilization: allocated = held by anything; active = serving slots busy + batch held.
    busy_share = np.minimum(1.0, lam / np.maximum(tr.servers * tr.mu_rps, 1e-12))
    share = tr.layout.gpu_share if tr.layout is not None else float(svc.gpus_per_replica)
    active = np.minimum(tr.ready_replicas * share * busy_share + tr.batch_gpus, tr.pool_gpus)
    pool_gpu_h = gpu_hours(np.full(scn.steps, float(tr.pool_gpus)), step_s=scn.step_s)

    runs = tr.runs
    batch_h = float(sum(r.held_gpu_h for r in runs))
    good_h = float(sum(r.goodput_gpu_h for r in runs))
    lost_h = float(sum(r.lost_gpu_h for r in runs))
    done = [r for r in runs if r.completed]
    jct = [(r.end_step + 1 - r.release_step) * step_h for r in done]
    # Steps from arrival to the first start; a run that never started waited at least until
    # the period's end (counted so: a policy cannot look good by never starting a run).
    delay = [((r.first_start_step if r.first_start_step >= 0 else scn.steps) - r.release_step) * step_h
             for r in runs]

    hours = scn.steps * step_h
    price = {"reserved": pool.price_reserved_per_gpu_h, "spot": pool.price_spot_per_gpu_h,
             "on_demand": pool.price_on_demand_per_gpu_h}
    cost = {k: tr.gpus_by_price.get(k, 0.0) * hours * price[k] for k in price}
    cost_total = float(sum(cost.values()))
    infer_h = gpu_hours(tr.inference_gpus, step_s=scn.step_s)
    useful_h = infer_h + good_h

    minutes = float(step_minutes(violation.sum(), step_s=scn.step_s))
    ledger = externality_ledger(scn, tr, violation)
    ext_cost = float(sum(r["cost"] for r in ledger if r["team"] != svc.team))

    summary = PolicySummary(
        slo_compliance=float(lat.within_slo.sum() / total_req) if total_req > 0 else 1.0,
        slo_compliance_minutes=float(1.0 - violation.sum() / n_busy) if n_busy else 1.0,
        violation_minutes=minutes,
        p99_ms=float(lat.overall_p99_s * 1000.0),
        worst_minute_p99_ms=float(p99_ms[busy].max()) if n_busy else 0.0,
        median_minute_p99_ms=float(np.median(p99_ms[busy])) if n_busy else 0.0,
        pool_utilization=gpu_hours(tr.allocated_gpus, step_s=scn.step_s) / pool_gpu_h,
        pool_utilization_active=gpu_hours(active, step_s=scn.step_s) / pool_gpu_h,
        batch_gpu_hours=batch_h,
        batch_goodput_gpu_hours=good_h,
        batch_lost_gpu_hours=lost_h,
        batch_work_gpu_hours=float(sum(r.work_gpu_h for r in runs)),
        batch_unfinished_gpu_hours=float(sum(r.unfinished_gpu_h for r in runs)),
        batch_runs_unfinished=int(sum(not r.completed for r in runs)),
        queue_delay_median_h=float(np.median(delay)) if delay else None,
        queue_delay_max_h=float(np.max(delay)) if delay else None,
        batch_jobs_submitted=len(runs),
        batch_jobs_completed=len(done),
        mean_job_completion_h=float(np.mean(jct)) if jct else None,
        max_job_completion_h=float(np.max(jct)) if jct else None,
        batch_interruptions=int(sum(r.interruptions for r in runs)),
        checkpoint_interval_min={k: (v if math.isfinite(v) else None)
                                 for k, v in tr.checkpoint_interval_min.items()},
        mean_interruption_interval_min=(tr.mean_interruption_interval_min
                                        if math.isfinite(tr.mean_interruption_interval_min) else None),
        failed_requests=float(lat.failed.sum()),
        inference_gpu_hours=infer_h,
        useful_gpu_hours=useful_h,
        cost_reserved=cost["reserved"],
        cost_spot=cost["spot"],
        cost_on_demand=cost["on_demand"],
        cost_total=cost_total,
        cost_per_useful_gpu_hour=cost_total / useful_h if useful_h > 0 else None,
        violation_cost=minutes * pool.violation_price_per_min,
        externality_cost=ext_cost,
        mig_profile=tr.layout.profile.name if tr.layout is not None else None,
        notes=tuple(tr.notes),
    )
    series = {
        "ts_ms": scn.ts_ms(),
        "traffic_rps": lam,
        "p99_ms": p99_ms,
        "desired_replicas": tr.desired_replicas,
        "ready_replicas": tr.ready_replicas,
        "inference_gpus": tr.inference_gpus,
        "batch_gpus": tr.batch_gpus,
        "allocated_gpus": tr.allocated_gpus,
        "within_slo_share": within_share,
        "failed_requests": lat.failed,
        "violation": violation,
    }
    jobs = [{"job": r.job, "team": r.team, "release_step": r.release_step,
             "first_start_step": r.first_start_step, "end_step": r.end_step,
             "completed": r.completed, "gpus": r.gpus, "held_gpu_h": r.held_gpu_h,
             "goodput_gpu_h": r.goodput_gpu_h, "lost_gpu_h": r.lost_gpu_h,
             "work_gpu_h": r.work_gpu_h, "unfinished_gpu_h": r.unfinished_gpu_h,
             "queue_delay_h": d, "interruptions": r.interruptions} for r, d in zip(runs, delay)]
    return PolicyResult(tr.policy, series, summary, ledger, jobs, tr)


def externality_ledger(scn: PoolScenario, tr: CapacityTrace, violation: np.ndarray
                       ) -> list[dict[str, Any]]:
    """Violation minutes and their price per team (:func:`analytics.measures.split_violation_by_team`);
    what nobody else caused is the service's, its own row last."""
    price = scn.pool.violation_price_per_min
    parts, own = split_violation_by_team(violation, tr.blame_by_team)
    rows: list[dict[str, Any]] = []
    for team, part in [*parts.items(), (scn.service.team, own)]:
        minutes = float(step_minutes(part.sum(), step_s=scn.step_s))
        if minutes > 0:
            rows.append({"team": team, "violation_minutes": minutes, "cost": minutes * price})
    return rows


def headroom_by_hour(scenario: PoolScenario, policy: str) -> pl.DataFrame:
    """The largest surge absorbable within the SLO, by hour of day (UTC).

    A surge faster than the warm-up meets only the replicas already ready, so the headroom
    at a step is (largest arrival rate those slots serve within the SLO) / traffic.
    Returns columns ``hour``, ``max_surge_factor`` (median over days of the hour's worst
    step) and ``worst_surge_factor`` (the worst step of that hour in the period).
    """
    scenario.validate()
    tr = capacity(scenario, policy)
    svc = scenario.service
    keys = np.stack([tr.servers, np.round(tr.mu_rps, 9)], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    lam_max = np.zeros(uniq.shape[0])
    for mu in np.unique(uniq[:, 1]):
        sel = uniq[:, 1] == mu
        lam_max[sel] = max_arrival_within_slo(uniq[sel, 0], float(mu), svc.slo_ms / 1000.0,
                                              svc.service_cv,
                                              floor_s=svc.latency_floor_ms / 1000.0,
                                              busy_slowdown=svc.busy_slowdown,
                                              service_in_latency=svc.service_in_latency)
    cap = lam_max[inv.ravel()]
    lam = scenario.traffic_rps
    factor = np.where(lam > 0, cap / np.maximum(lam, 1e-12), np.inf)
    factor = np.minimum(factor, 100.0)
    steps_day = int(86400 / scenario.step_s)
    hour = np.floor(scenario.hour_of_day()).astype(np.int64)
    day = np.arange(scenario.steps) // steps_day
    df = pl.DataFrame({"hour": hour, "day": day, "f": factor})
    per_day = df.group_by(["day", "hour"]).agg(pl.col("f").min())
    return (per_day.group_by("hour")
            .agg(pl.col("f").median().alias("max_surge_factor"),
                 pl.col("f").min().alias("worst_surge_factor"))
            .sort("hour"))


def frontier(scenario: PoolScenario, sweep: str = "reservation", points: int = 50,
             policy: str | None = None) -> pl.DataFrame:
    """Utilization against SLO compliance as one knob moves.

    ``sweep``: ``reservation`` moves the GPUs reserved for inference (partitioned, 0 to the
    pool less class B);
    ``mig`` moves the pool size from half to 1.5x under the ``mig`` policy; ``gpus`` does
    the same under ``policy`` (default ``shared``). Columns: ``x`` (the knob), ``policy``,
    ``utilization``, ``utilization_active``, ``slo_compliance``, ``slo_compliance_minutes``,
    ``violation_minutes``, ``batch_goodput_gpu_hours``, ``cost_per_useful_gpu_hour``,
    ``externality_cost``.
    """
    pool = scenario.pool
    if sweep == "reservation":
        pol = "partitioned"
        top = pool.gpus - round(pool.split_b * pool.gpus)
        xs = np.unique(np.round(np.linspace(0.0, top, points))).astype(int)
        scns = [replace(scenario, pool=replace(pool, reservation_gpus=int(x))) for x in xs]
    elif sweep in ("mig", "gpus"):
        pol = "mig" if sweep == "mig" else (policy or "shared")
        xs = np.unique(np.round(np.linspace(0.5, 1.5, points) * pool.gpus)).clip(1)
        # a set reservation never outgrows the smaller pools of the sweep
        scns = [replace(scenario, pool=replace(pool, gpus=int(x), reservation_gpus=(
            pool.reservation_gpus if pool.reservation_gpus < 0
            else min(pool.reservation_gpus, int(x) - round(pool.split_b * int(x)))))) for x in xs]
    else:
        raise ConfigError(f"frontier sweep {sweep!r}: choose reservation, mig or gpus")
    rows = []
    memo = StableMemo(scenario.steps)  # every point replays the same demand
    for x, s in zip(xs, scns):
        s.validate()
        r = _result(s, capacity(s, pol), memo).summary
        rows.append({"x": float(x), "policy": pol, "utilization": r.pool_utilization,
                     "utilization_active": r.pool_utilization_active,
                     "slo_compliance": r.slo_compliance,
                     "slo_compliance_minutes": r.slo_compliance_minutes,
                     "violation_minutes": r.violation_minutes,
                     "batch_goodput_gpu_hours": r.batch_goodput_gpu_hours,
                     "cost_per_useful_gpu_hour": r.cost_per_useful_gpu_hour,
                     "externality_cost": r.externality_cost, "gpu_cost": r.cost_total})
    return pl.DataFrame(rows)


def next_gpus(scenario: PoolScenario, policies: tuple[str, ...] = POLICIES,
              points: int = 9) -> pl.DataFrame:
    """What the next GPUs buy: each policy's violation minutes against the pool's GPU cost as
    the pool grows or shrinks (half to 1.5x the GPUs it has; the inference reservation as set,
    or automatic, within each size).

    Columns ``policy``, ``gpus``, ``gpu_cost`` ($ for the period), ``violation_minutes``,
    ``slo_compliance``, ``batch_goodput_gpu_hours`` (a smaller pool can "cut" violations only
    by leaving the batch job no room to run: this says so), ``current`` (the pool as it is).

    >>> from analytics.whatif import PRESETS
    >>> f = next_gpus(PRESETS["morning-ramp"](2), ("shared",), points=3)
    >>> f["gpus"].to_list(), f.filter(f["current"])["gpus"].to_list()
    ([32.0, 64.0, 96.0], [64.0])
    """
    parts = []
    for pol in policies:
        sweep = "mig" if pol == "mig" else "gpus"
        f = frontier(scenario, sweep, points=points, policy=pol)
        parts.append(f.select(pl.lit(pol).alias("policy"), pl.col("x").alias("gpus"), "gpu_cost",
                              "violation_minutes", "slo_compliance", "batch_goodput_gpu_hours"))
    out = pl.concat(parts) if parts else pl.DataFrame(schema={
        "policy": pl.Utf8, "gpus": pl.Float64, "gpu_cost": pl.Float64, "violation_minutes": pl.Float64,
        "slo_compliance": pl.Float64, "batch_goodput_gpu_hours": pl.Float64})
    return out.with_columns((pl.col("gpus") == float(scenario.pool.gpus)).alias("current"))


def capacity_plan(scenario: PoolScenario) -> pl.DataFrame:
    """Three pools: A the inference reservation, B soft-shared, C spot for batch.

    A is the scenario's one reservation (:func:`analytics.whatif.policies.reservation`: the
    GPUs the partitioned and MIG policies give inference). C: batch's daily GPU-hours spread
    over the day, plus what spot interruptions throw away, at least the largest gang (spot
    price). B: what is left of the current pool, soft-shared (reserved price); zero when A +
    C exceed the pool. Columns: ``pool``, ``gpus``, ``price_per_gpu_h``, ``cost_per_day``,
    ``purpose``.
    """
    scenario.validate()
    svc, pool = scenario.service, scenario.pool
    a, why_a = reservation(scenario)
    daily = sum(j.gpus * j.duration_h for j in scenario.batch.jobs if j.daily)
    once = sum(j.gpus * j.duration_h for j in scenario.batch.jobs if not j.daily)
    days = max(scenario.steps * scenario.step_s / 86400.0, 1.0)
    per_day = daily + once / days
    loss = 1.0 + pool.spot_interruptions_per_h * max(
        [j.restore_min / 60.0 + 0.5 for j in scenario.batch.jobs] or [0.0])
    largest = max([j.gpus for j in scenario.batch.jobs] or [0])
    c = int(max(math.ceil(per_day * loss / 24.0), largest if per_day > 0 else 0))
    b = max(0, pool.gpus - a - c)
    rows = [
        ("A", a, pool.price_reserved_per_gpu_h,
         f"inference reservation ({why_a}); {svc.slo_ms:g} ms p99; batch never touches it"),
        ("B", b, pool.price_reserved_per_gpu_h,
         "soft-shared (time-sliced) for low-criticality work and overflow"),
        ("C", c, pool.price_spot_per_gpu_h,
         f"spot / interruptible for batch: {per_day:.0f} GPU-h a day, the largest gang "
         f"{largest} GPUs"),
    ]
    return pl.DataFrame(
        [{"pool": p, "gpus": g, "price_per_gpu_h": pr, "cost_per_day": g * pr * 24.0,
          "purpose": why} for p, g, pr, why in rows])


def burst_bands(scenario: PoolScenario, policy: str, seeds: int | list[int] = 10, *,
                bursts_per_day: float = 3.0, max_surge: float = 2.0,
                max_burst_min: float = 30.0) -> pl.DataFrame:
    """p99 bands over random bursts: the policy's p99 per step across seeded surges.

    Each seed adds Poisson bursts (``bursts_per_day``) of uniform length up to
    ``max_burst_min`` and uniform factor 1..``max_surge`` on the traffic. Columns ``ts_ms``,
    ``p99_ms_p10``, ``p99_ms_p50``, ``p99_ms_p90``, ``p99_ms_max``, ``violation_share``
    (share of seeds in violation at the step).
    """
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    n = scenario.steps
    steps_min = 60.0 / scenario.step_s
    days = n * scenario.step_s / 86400.0
    p99s, viol = [], []
    for seed in seed_list:
        rng = np.random.default_rng(seed)
        mult = np.ones(n)
        for _ in range(rng.poisson(bursts_per_day * days)):
            start = int(rng.integers(0, n))
            length = max(1, int(rng.uniform(1.0, max_burst_min) * steps_min))
            mult[start:start + length] *= rng.uniform(1.0, max_surge)
        s = replace(scenario, traffic_rps=scenario.traffic_rps * mult)
        r = simulate(s, policy)
        p99s.append(r.series["p99_ms"])
        viol.append(r.series["violation"])
    arr = np.vstack(p99s)
    q = np.percentile(arr, [10, 50, 90], axis=0)
    return pl.DataFrame({"ts_ms": scenario.ts_ms(), "p99_ms_p10": q[0], "p99_ms_p50": q[1],
                         "p99_ms_p90": q[2], "p99_ms_max": arr.max(axis=0),
                         "violation_share": np.vstack(viol).mean(axis=0)})
