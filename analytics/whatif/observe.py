"""What the store saw of one inference service and its pool, as arrays the model can use.

The timelines (``analytics.timeline``) are frames keyed by step; calibration and the backtest
need one service's steps side by side with its pool's holdings: traffic, observed p99, desired
and ready replicas, GPUs held by batch, by the other services and by everything else, and the
batch job instances (contiguous runs of a batch workload holding GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.measures import gpus_per_replica, infer_desired, over_slo
from analytics.slo import SloTable
from analytics.times import step_start_ms, utc_hour
from analytics.whatif.params import BatchJob

MIN_STEPS = 60  # an hour at 1-minute steps: less cannot show a scale-up or a batch job
DEFAULT_WARMUP_MIN = 5.0  # replicas settle this long before their load per replica counts


@dataclass
class BatchRun:
    """One observed instance of a batch workload: steps [start, end) holding ``gpus``."""

    workload: str
    team: str
    start: int
    end: int
    gpus: int


@dataclass
class Observation:
    """One service's observed steps (``ts_ms`` = end of each step) and its pool's holdings."""

    service: str
    pool: str
    step_s: int
    ts_ms: np.ndarray
    rps: np.ndarray
    p99_ms: np.ndarray  # NaN where no request finished
    desired: np.ndarray
    ready: np.ndarray
    own_gpus: np.ndarray  # GPUs this service's replicas held
    batch_gpus: np.ndarray
    others_gpus: np.ndarray  # other services, 'other', 'unmanaged' and 'unknown' classes
    idle_gpus: np.ndarray
    pool_gpus: np.ndarray
    runs: list[BatchRun] = field(default_factory=list)
    unknown_gpus: np.ndarray | None = None  # of others_gpus: no pod label, nothing says free
    desired_source: str = "autoscaler"  # or how desired replicas were inferred from traffic
    services: list[str] = field(default_factory=list)  # every service the frame had
    team: str | None = None  # the team whose workloads serve it (most GPU-steps), if labelled

    @property
    def steps(self) -> int:
        return int(self.ts_ms.shape[0])

    @property
    def step_min(self) -> float:
        return self.step_s / 60.0


def _ts_ms(frame: pl.DataFrame) -> pl.DataFrame:
    if "ts_ms" in frame.columns:
        return frame
    dt = frame.schema["ts"]
    expr = (pl.col("ts").dt.epoch("ms") if isinstance(dt, pl.Datetime)
            else pl.col("ts").cast(pl.Int64))
    return frame.with_columns(expr.alias("ts_ms"))


def _num(frame: pl.DataFrame, col: str) -> np.ndarray:
    if col not in frame.columns:
        return np.full(frame.height, np.nan)
    return frame[col].cast(pl.Float64).fill_null(float("nan")).to_numpy().astype(np.float64)


def pick_service(services: pl.DataFrame, slos: SloTable | None) -> str:
    """The service with the most steps above its SLO (ties: the most requests; a service the
    table gives no SLO, or no table, counts none)."""
    names = sorted(services["service"].drop_nulls().unique().to_list())
    if not names:
        raise NotEnoughDataError("the service timeline has no services: load request-rate and "
                                 "latency metrics (vLLM, http_server_request_duration_seconds)")
    best, key = names[0], (-1.0, -1.0)
    for name in names:
        g = services.filter(pl.col("service") == name)
        slo = slos.ms(name) if slos is not None else None
        over = float(over_slo(g["p99_ms"].to_numpy(), slo).sum()) if slo else 0.0
        k = (over, float(g["rps"].fill_null(0.0).sum()))
        if k > key:
            best, key = name, k
    return best


def service_pools(services: pl.DataFrame) -> dict[str, str]:
    """Each service's pool: the one most of its steps name (``default`` when none does), as
    :func:`observe` takes it; services in name order."""
    out: dict[str, str] = {}
    for name in sorted(services["service"].drop_nulls().unique().to_list()):
        seen = services.filter(pl.col("service") == name)["pool"].drop_nulls()
        out[name] = str(seen.mode().sort()[0]) if seen.len() else "default"
    return out


def pool_services(services: pl.DataFrame, slos: SloTable | None,
                  service: str | None = None) -> tuple[str, list[str]]:
    """The pool the default answer is for, and every inference service on it (name order): the
    pool of ``service``, by default of the service most often above its SLO (:func:`pick_service`).
    A pool's policy is one decision for all of them (:func:`analytics.measures.best_policy`).

    Raises
    ------
    NotEnoughDataError
        The service timeline has no services.
    """
    pools = service_pools(services)
    name = service or pick_service(services, slos)
    if name not in pools:
        raise NotEnoughDataError(f"service {name!r} is not in the service timeline; services "
                                 f"there: {', '.join(pools) or 'none'}")
    pool = pools[name]
    return pool, [s for s, p in pools.items() if p == pool]


def observe(services: pl.DataFrame, pools: pl.DataFrame, holdings: pl.DataFrame, *,
            service: str | None = None, step_s: int = 60,
            slos: SloTable | None = None) -> Observation:
    """One service's steps and its pool's holdings from the three timeline frames.

    Parameters
    ----------
    services, pools, holdings:
        ``service_timeline``, ``pool_timeline`` and ``holdings`` output (``ts`` = step end).
    service:
        The inference service to model; default the one with the most steps above its SLO.
    slos:
        Every service's p99 SLO; only picks the default service.

    Raises
    ------
    NotEnoughDataError
        No such service, or fewer than ``MIN_STEPS`` steps with traffic.
    """
    services = _ts_ms(services)
    known = sorted(services["service"].drop_nulls().unique().to_list())
    name = service or pick_service(services, slos)
    if name not in known:
        raise NotEnoughDataError(f"service {name!r} is not in the service timeline; services "
                                 f"there: {', '.join(known) or 'none'}")
    s = services.filter(pl.col("service") == name).sort("ts_ms")
    pool = service_pools(s)[name]
    if s.filter(pl.col("rps").fill_null(0.0) > 0).height < MIN_STEPS:
        raise NotEnoughDataError(f"service {name!r} has fewer than {MIN_STEPS} steps with "
                                 "traffic in this range; widen the range")
    grid = s.select("ts_ms")
    p = _ts_ms(pools)
    if "pool" in p.columns:
        p = p.filter(pl.col("pool").fill_null("default") == pool)
    p = grid.join(p.select("ts_ms", "gpus_total", "gpus_idle"), on="ts_ms", how="left")
    h = _ts_ms(holdings)
    h = h.filter(pl.col("pool").fill_null("default") == pool).with_columns(
        pl.col("cls").fill_null("unknown"), pl.col("workload").fill_null("(unlabelled)"),
        pl.col("team").fill_null("(no team)"))
    per_step = h.group_by("ts_ms").agg(
        pl.col("gpus").filter((pl.col("cls") == "inference") & (pl.col("workload") == name))
        .sum().alias("own"),
        pl.col("gpus").filter(pl.col("cls") == "batch").sum().alias("batch"),
        pl.col("gpus").filter(((pl.col("cls") == "inference") & (pl.col("workload") != name))
                              | pl.col("cls").is_in(["other", "unmanaged", "unknown"])).sum().alias("others"),
        pl.col("gpus").filter(pl.col("cls") == "unknown").sum().alias("unknown"))
    per_step = grid.join(per_step, on="ts_ms", how="left").fill_null(0.0)
    ts = s["ts_ms"].to_numpy().astype(np.int64)
    rps = np.nan_to_num(_num(s, "rps"), nan=0.0).clip(min=0.0)
    ready = _num(s, "ready_replicas")
    if np.isnan(ready).all():
        ready = _num(s, "replicas")
    ready = np.nan_to_num(ready, nan=0.0)
    desired = _num(s, "desired_replicas")
    idle = np.nan_to_num(_num(p, "gpus_idle"), nan=0.0)
    own = per_step["own"].to_numpy().astype(float)
    if np.isnan(desired).all():
        # no autoscaler linked: what it would have asked for, from traffic (the events'
        # evidence uses the same inference, analytics.measures.infer_desired)
        # Uncapped: the fit reads the autoscaler's maximum from where this demand outran the
        # ready replicas with a GPU free (fit.ready_cap), which a capped demand never does.
        got = infer_desired(rps, ready, idle, gpus_per_replica(own, ready) or 1.0,
                            int(round(DEFAULT_WARMUP_MIN * 60 / step_s)), cap_at_most_ready=False)
        if got is not None:
            desired, how = got
            desired_source = how.describe()
        else:
            desired = ready.copy()
            desired_source = ("ready replicas stand in: no autoscaler signal linked and too few uncontended "
                              "steps to infer one from traffic")
    else:
        desired = np.where(np.isnan(desired), ready, desired)
        desired_source = "autoscaler"
    obs = Observation(
        service=name, pool=pool, step_s=step_s, ts_ms=ts, rps=rps, p99_ms=_num(s, "p99_ms"),
        desired=desired, ready=ready, own_gpus=own,
        batch_gpus=per_step["batch"].to_numpy().astype(float),
        others_gpus=per_step["others"].to_numpy().astype(float),
        idle_gpus=idle,
        pool_gpus=np.nan_to_num(_num(p, "gpus_total"), nan=0.0), services=known,
        unknown_gpus=per_step["unknown"].to_numpy().astype(float), desired_source=desired_source)
    mine = (h.filter((pl.col("cls") == "inference") & (pl.col("workload") == name)
                     & (pl.col("team") != "(no team)"))
            .group_by("team").agg(pl.col("gpus").sum()).sort(["gpus", "team"], descending=[True, False]))
    obs.team = mine["team"][0] if mine.height else None
    obs.runs = batch_runs(h.filter(pl.col("cls") == "batch"), ts, step_s)
    return obs


def batch_runs(batch: pl.DataFrame, ts_ms: np.ndarray, step_s: int) -> list[BatchRun]:
    """Contiguous runs of each batch workload holding GPUs, as step indices of ``ts_ms``."""
    runs: list[BatchRun] = []
    if batch.height == 0:
        return runs
    index = {int(t): i for i, t in enumerate(ts_ms.tolist())}
    per = batch.group_by("ts_ms", "workload", "team").agg(pl.col("gpus").sum()).sort("ts_ms")
    for (workload, team), g in per.group_by(["workload", "team"], maintain_order=True):
        idx = np.array([index.get(int(t), -1) for t in g["ts_ms"].to_list()])
        gpus = g["gpus"].to_numpy().astype(float)
        keep = (idx >= 0) & (gpus > 0.5)
        idx, gpus = idx[keep], gpus[keep]
        if idx.size == 0:
            continue
        breaks = np.flatnonzero(np.diff(idx) > 1) + 1
        for a, b in zip(np.concatenate(([0], breaks)), np.concatenate((breaks, [idx.size]))):
            runs.append(BatchRun(str(workload), str(team), int(idx[a]), int(idx[b - 1]) + 1,
                                 int(max(1, round(float(np.median(gpus[a:b])))))))
    runs.sort(key=lambda r: (r.start, r.workload))
    return runs


def _hours(obs: Observation, idx: int) -> float:
    return float(utc_hour(step_start_ms(obs.ts_ms[idx], obs.step_s * 1000)))


def observed_jobs(obs: Observation) -> tuple[tuple[BatchJob, ...], dict[str, str]]:
    """The batch runs that happened, one job each: its arrival (the end of the first step it
    held GPUs), its GPUs (the run's median) and its work (its length at that size); the
    checkpoint, restore and eviction costs are the defaults. Every policy moves these runs,
    and under ``shared`` they are the backtest's replay."""
    jobs: list[BatchJob] = []
    by_workload: dict[str, list] = {}
    for k, r in enumerate(obs.runs):
        by_workload.setdefault(r.workload, []).append(r)
        jobs.append(BatchJob(name=f"{r.workload}#{k}", team=r.team, gpus=r.gpus,
                             start_hour=_hours(obs, r.start),
                             duration_h=(r.end - r.start) * obs.step_s / 3600.0, daily=False,
                             arrival_ms=int(obs.ts_ms[r.start])))
    prov = {}
    for name, runs in sorted(by_workload.items()):
        hours = [(r.end - r.start) * obs.step_s / 3600.0 for r in runs]
        prov[f"batch.{name}"] = (f"store: {len(runs)} runs as they happened (their starts, GPUs and "
                                 f"lengths, {min(hours):.1f} to {max(hours):.1f} h)")
    return tuple(jobs), prov
