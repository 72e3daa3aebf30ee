"""Scenarios from the store: every parameter the data shows, and the runs that happened.

``calibrate`` reads the pool and service timelines and sets each parameter the data shows,
recording where it came from in ``PoolScenario.provenance`` (``store: ...``; ``default`` for
what the store cannot tell); its batch is the runs that happened (``observed_jobs``), which
every policy moves by its rule. The check of the model against what happened is
:mod:`analytics.whatif.backtest`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np
import polars as pl

from analytics.measures import gpus_per_replica, pool_size, warmup_steps
from analytics.slo import SloTable
from analytics.sql.whatif import GPU_MODELS
from analytics.resultcache import remembered, remembered_by_inputs
from analytics.timeline import TimelineConfig, Timelines, store_timelines
from analytics.timeline.cache import timelines_origin
from analytics.whatif.backtest import backtest_from
from analytics.whatif.fit import (
    ServiceFit,
    autoscaler_rps_per_replica,
    fit_service,
    patience_candidates,
    ready_cap,
    replica_cap,
)
from analytics.whatif.observe import Observation, observe, observed_jobs, pick_service
from analytics.whatif.params import MAX_SLO_MS, BatchParams, PoolParams, PoolScenario, ServiceParams


def mig_model_for(model_name: str) -> str | None:
    """The MIG table key (``analytics.whatif.mig.MIG_PROFILES``) of a dcgm-exporter
    ``modelName`` such as ``NVIDIA H100 80GB HBM3``; None for a GPU without a table."""
    name = model_name.upper()
    if "H200" in name:
        return "H200-141GB"
    if "H100" in name or "H800" in name:
        return "H100-80GB"
    if "A100" in name or "A800" in name:
        return "A100-40GB" if "40GB" in name.replace(" ", "") else "A100-80GB"
    return None


def gpu_model_of(store: Any) -> tuple[str, str] | None:
    """The pool's GPU model as a MIG table key, and its provenance, from the store.

    The model most GPUs report (``series.model``, dcgm-exporter's ``modelName``); None when
    the store names no model or none with a MIG table.
    """
    return gpu_model_from(store.query(GPU_MODELS).select("model", "gpus").rows())


def gpu_model_from(models: Iterable[tuple[str, int]]) -> tuple[str, str] | None:
    """:func:`gpu_model_of` from ``(modelName, GPUs)`` pairs, most GPUs first (the timelines'
    ``facts.gpu_models``: read in the timeline pass).

    >>> gpu_model_from([("Tesla T4", 3), ("NVIDIA H100 80GB HBM3", 2)])
    ('H100-80GB', "store: modelName 'NVIDIA H100 80GB HBM3' on 2 of 5 GPUs")
    """
    rows = list(models)
    if not rows:
        return None
    total = sum(int(n) for _, n in rows)
    for model, gpus in rows:
        key = mig_model_for(str(model))
        if key is not None:
            return key, f"store: modelName '{model}' on {gpus} of {total} GPUs"
    return None


@dataclass
class Calibration:
    """A calibrated scenario, its backtest, and the observation both came from."""

    scenario: PoolScenario
    backtest: dict[str, Any]
    observation: Observation
    fit: ServiceFit | None = None
    notes: list[str] = field(default_factory=list)


def scenario_from(obs: Observation, *, slo_ms: float | None = None,
                  gpu_model: tuple[str, str] | None = None
                  ) -> tuple[PoolScenario, ServiceFit | None]:
    """The calibrated scenario of an observation (see ``calibrate``); ``gpu_model`` is a
    MIG table key and its provenance (``gpu_model_of``), else the default model."""
    prov: dict[str, str] = {}
    svc = ServiceParams()
    step_min = obs.step_min
    prov["traffic_rps"] = (f"store: {obs.service} request rate, {obs.steps} steps of "
                           f"{obs.step_s} s")
    slo = float(slo_ms) if slo_ms else svc.slo_ms
    prov["service.slo_ms"] = "user (view setting)" if slo_ms else "default"
    measured_gpr = gpus_per_replica(obs.own_gpus, obs.ready)
    gpr = measured_gpr or 1.0
    gpr_i = int(min(16, max(1, round(gpr))))
    prov["service.gpus_per_replica"] = (f"store: GPUs held / ready replicas, median {gpr:.2f}"
                                        if measured_gpr is not None else "default")
    patience = patience_candidates(obs.p99_ms, slo)
    timeouts_s = patience or (svc.timeout_s,)
    # By its inputs: the forecast, the review and a copy of the store fit the same steps alike.
    fit = remembered_by_inputs("fit", (obs.rps, obs.ready, obs.p99_ms, slo, obs.step_s, timeouts_s),
                               lambda: fit_service(obs.rps, obs.ready, obs.p99_ms, slo, step_s=obs.step_s,
                                                   timeouts_s=timeouts_s))
    # The team the data names (a bill goes to a team the store has), else the service itself.
    kw: dict[str, Any] = {"team": obs.team or obs.service, "slo_ms": slo, "gpus_per_replica": gpr_i}
    prov["service.team"] = (f"store: the team of {obs.service}'s workloads" if obs.team
                            else "store: the service's name (its workloads carry no team)")
    if fit is not None:
        kw.update(service_rate_per_slot_rps=float(f"{fit.service_rate_per_slot_rps:.4g}"),
                  concurrency=fit.concurrency, service_cv=fit.service_cv,
                  latency_floor_ms=min(MAX_SLO_MS, round(fit.latency_floor_ms, 1)),
                  busy_slowdown=fit.busy_slowdown,
                  service_in_latency=fit.service_in_latency,
                  p99_noise_log_sd=round(fit.p99_noise_log_sd, 3))
        why = (f"store: fit of p99 vs load per replica on {fit.steps_used} steps; agrees on "
               f"{fit.slo_agreement:.1%} of steps about the SLO, |log error| "
               f"{fit.log_p99_mae:.2f}")
        for k in ("service_rate_per_slot_rps", "concurrency", "service_cv", "latency_floor_ms",
                  "busy_slowdown", "service_in_latency"):
            prov[f"service.{k}"] = why
        prov["service.p99_noise_log_sd"] = (
            "store: how the steps' over/under-SLO calls scatter around the fitted curve (maximum "
            "likelihood)" if fit.p99_noise_log_sd > 0 else
            "store: none (the fitted curve calls every step as the store does, or no step was over)")
    else:
        for k in ("service_rate_per_slot_rps", "concurrency", "service_cv", "latency_floor_ms",
                  "busy_slowdown", "service_in_latency", "p99_noise_log_sd"):
            prov[f"service.{k}"] = "default (no steps with traffic, replicas and p99)"
    replica_rps = kw.get("service_rate_per_slot_rps", svc.service_rate_per_slot_rps) * \
        kw.get("concurrency", svc.concurrency)
    per_rep = autoscaler_rps_per_replica(obs.rps, obs.desired)
    if per_rep is not None:
        kw["target_utilization"] = float(min(1.0, max(0.05, round(per_rep / replica_rps, 3))))
        prov["service.target_utilization"] = (f"store: desired replicas vs traffic, "
                                              f"{per_rep:.3g} req/s per desired replica"
                                              + ("" if obs.desired_source == "autoscaler"
                                                 else f" ({obs.desired_source})"))
    else:
        prov["service.target_utilization"] = "default (no desired-replica data)"
    if obs.desired.size and np.nanmax(obs.desired) > 0:
        kw["min_replicas"] = int(max(0, np.nanmin(obs.desired)))
        prov["service.min_replicas"] = "store: fewest desired replicas"
    if obs.desired_source == "autoscaler":
        cap = replica_cap(obs.rps, obs.desired, per_rep)
        cap_why = "store: most desired replicas, kept while traffic asked for more"
    else:
        # Desired replicas inferred from traffic are never capped (their top says nothing), so
        # the maximum shows in the ready replicas: held at their most while the inferred count
        # asked for more and a free GPU could have placed another (not a shortage of GPUs).
        cap = ready_cap(obs.ready, obs.desired, obs.idle_gpus >= gpr_i)
        cap_why = ("store: most ready replicas, kept while the replicas inferred from traffic "
                   "asked for more and GPUs were free (no autoscaler metrics)")
    if cap is not None and cap >= kw.get("min_replicas", svc.min_replicas):
        kw["max_replicas"] = cap
        prov["service.max_replicas"] = cap_why
    else:
        prov["service.max_replicas"] = "default (the autoscaler never met a maximum)"
    w = warmup_steps(obs.desired, obs.ready, obs.idle_gpus, gpr)
    if w is not None:
        kw["warmup_min"] = float(min(60.0, w * step_min))
        prov["service.warmup_min"] = ("store: median lag from a scale-up free GPUs could place "
                                      "to the replicas being ready")
    else:
        prov["service.warmup_min"] = "default (no scale-up with free GPUs seen)"
    if patience:
        kw["timeout_s"] = fit.timeout_s if fit is not None and fit.timeout_s else patience[0]
        prov["service.timeout_s"] = ("store: p99 plateau of the steps above half the highest "
                                     "step p99 (where waits stop at the clients' patience), "
                                     "the quantile of it the replay agrees with best")
    else:
        prov["service.timeout_s"] = "default"
    for k in ("cooldown_min", "model_memory_gib", "decode_heavy"):
        prov[f"service.{k}"] = "default"
    service = replace(svc, **kw)

    if (obs.pool_gpus > 0).any():
        # Every GPU of the pool is in the model: the idle ones free, what other services and
        # unmodelled work held kept held step by step, as observed (others_gpus).
        pool_gpus = int(round(pool_size(obs.pool_gpus)))
        prov["pool.gpus"] = (f"store: GPUs in pool '{obs.pool}' (the most it had at any step, as the "
                             "Overview's pool size)")
        prov["others_gpus"] = ("store: GPUs other services, 'other' and 'unmanaged' work held at each "
                               f"step, as observed (up to {float(np.max(obs.others_gpus, initial=0)):.1f})"
                               + (f"; {float(np.max(obs.unknown_gpus if obs.unknown_gpus is not None else [0.0], initial=0)):.1f} GPUs without a pod "
                                  "label and nothing to say if they are free (unknown) are assumed held"
                                  if float(np.max(obs.unknown_gpus if obs.unknown_gpus is not None else [0.0], initial=0)) > 0 else ""))
        others = obs.others_gpus.copy()
    else:
        most = float(np.nanmax(np.maximum(obs.desired, obs.ready))) if obs.steps else 1.0
        pool_gpus = int(max(1, math.ceil(most * gpr_i)))
        prov["pool.gpus"] = ("store: no GPU holdings in the store; the most replicas desired "
                             "times GPUs per replica")
        others = None
    jobs, jprov = observed_jobs(obs)
    prov.update(jprov)
    prov["batch.jobs"] = f"store: {len(obs.runs)} batch runs in the period" if obs.runs \
        else "store: no batch holdings in the period"
    pool = PoolParams(gpus=pool_gpus)
    for k in ("gpu_model", "price_reserved_per_gpu_h", "headroom", "tidal_start_hour",
              "violation_price_per_min"):
        prov[f"pool.{k}"] = "default"
    prov["pool.reservation_gpus"] = ("automatic: the peak's desired replicas (the calibrated "
                                     "autoscaler on the store's traffic) x GPUs per replica, plus the headroom")
    if gpu_model is not None:
        pool = replace(pool, gpu_model=gpu_model[0])
        prov["pool.gpu_model"] = gpu_model[1]
    scn = PoolScenario(traffic_rps=obs.rps.copy(), others_gpus=others, start_ts_ms=int(obs.ts_ms[0]),
                       step_s=obs.step_s, service=service, batch=BatchParams(jobs=jobs),
                       pool=pool, name=f"store:{obs.service}",
                       description=f"{obs.service} in pool '{obs.pool}', calibrated from the "
                                   f"store ({obs.steps} steps)", provenance=prov)
    scn.validate()
    return scn, fit


def calibrate_frames(services: pl.DataFrame, pools: pl.DataFrame, holdings: pl.DataFrame, *,
                     service: str | None = None, step_s: int = 60,
                     slos: SloTable | None = None,
                     observed_policy: str = "shared",
                     gpu_model: tuple[str, str] | None = None,
                     on_stage: Callable[[str], None] = lambda _words: None) -> Calibration:
    """``calibrate`` plus ``backtest`` on timeline frames already built (the app's cache).

    ``slos`` decides the modelled service's SLO (and, without ``service``, which one is
    modelled); without it the default SLO, recorded as such. The frames do not carry the GPU
    model: pass ``gpu_model_of(store)`` as ``gpu_model`` (else the default model, recorded as
    such). ``on_stage`` hears each stage's words as it starts (a first calibration takes seconds:
    the page's status, the CLI's progress line)."""
    on_stage("reading the service's traffic, latency and replicas")
    obs = observe(services, pools, holdings, service=service, step_s=step_s, slos=slos)
    on_stage(f"fitting {obs.service}'s latency to its load")
    scn, fit = scenario_from(obs, slo_ms=slos.ms(obs.service) if slos is not None else None, gpu_model=gpu_model)
    on_stage("replaying the observed period (the backtest)")
    bt = backtest_from(obs, scn, observed_policy=observed_policy)
    scn.provenance["backtest"] = (
        f"replay under '{observed_policy}': {bt['model_violation_minutes']:.0f} violation "
        f"minutes vs {bt['observed_violation_minutes']:.0f} observed "
        f"({bt['violation_minutes_error']:+.0%}); batch {bt['model_batch_gpu_hours']:.0f} GPU-h vs "
        f"{bt['observed_batch_gpu_hours']:.0f} observed ({bt['batch_gpu_hours_error']:+.0%}); period p99 "
        f"{bt['model_p99_ms']:.0f} ms vs {bt['observed_p99_ms']:.0f} ms ({bt['p99_error']:+.0%})")
    return Calibration(scn, bt, obs, fit)


# Timelines built from frames (a notebook's, a test's) have no store behind them for the result
# cache to key on: those are calibrated once per their content (Timelines.digest) in this process.
CALIBRATIONS_KEPT = 16
_CALIBRATIONS: OrderedDict[tuple[Any, ...], Calibration] = OrderedDict()
_CALIBRATIONS_LOCK = threading.Lock()


def calibrate_timelines(tl: Timelines, *, service: str | None = None, step_s: int = 60,
                        slos: SloTable | None = None,
                        observed_policy: str = "shared",
                        on_stage: Callable[[str], None] = lambda _words: None) -> Calibration:
    """:func:`calibrate_frames` on a timelines dict (``analytics.timeline.store_timelines``, the
    app's cache), the GPU model taken from its facts: what the What-if page, the review and
    ``tidelens whatif`` call. Computed once per timelines, service and SLO table
    (:meth:`Timelines.remembered`; timelines with no store behind them once per their content in
    this process); the result is shared, never to be changed in place."""
    facts = tl.facts
    # Once per (store content, range, step, map, service, SLO table, code) for every surface:
    # a pool's every service calibrated by the What-if is each read again by the CLI, and the
    # default service is named first, so `tidelens whatif` and the review share its calibration.
    name = service or pick_service(tl.services, slos)

    def build() -> Calibration:
        return calibrate_frames(tl.services, tl.pool, tl.holdings, service=name, step_s=step_s, slos=slos,
                                observed_policy=observed_policy,
                                gpu_model=gpu_model_from(facts.gpu_models) if facts is not None else None,
                                on_stage=on_stage)

    if tl.origin is not None:
        return tl.remembered("calibration", (name, step_s, slos, observed_policy), build)
    # The SLOs by their values: where each came from (a flag, the sidebar) calibrates alike.
    key = (tl.digest(), name, step_s, slos.items() if slos is not None else None, observed_policy)
    with _CALIBRATIONS_LOCK:
        if key in _CALIBRATIONS:
            _CALIBRATIONS.move_to_end(key)
            return _CALIBRATIONS[key]
    cal = build()  # outside the lock: another service's calibration need not wait
    with _CALIBRATIONS_LOCK:
        _CALIBRATIONS[key] = cal
        while len(_CALIBRATIONS) > CALIBRATIONS_KEPT:
            _CALIBRATIONS.popitem(last=False)
    return cal


def calibrate(store: Any, *, pool: str | None = None, service: str | None = None,
              start_ms: int | None = None, end_ms: int | None = None,
              step_s: int = 60, slos: SloTable | None = None,
              wmap: Any = None) -> PoolScenario:
    """Build a ``PoolScenario`` from the store's timelines.

    Taken from the store (each recorded in ``PoolScenario.provenance``, parameter -> source):
    ``traffic_rps`` (the service's request rate over the period); the service rate per slot,
    concurrency, service-time cv, latency floor, busy slowdown, whether the service is in
    the measured latency, and the timeout (``fit.fit_service``: the p99 curve against load
    per ready replica, then a replay of the steps in order for capacity and patience);
    ``target_utilization`` and ``min_replicas`` (desired replicas against traffic);
    ``max_replicas`` (when the autoscaler held its most replicas while traffic asked for
    more); ``warmup_min`` (lag from a scale-up free GPUs could place to ready);
    ``gpus_per_replica``; ``pool.gpus`` (the pool less what other services and unmodelled
    work hold at this service's busy hours); ``pool.gpu_model`` (the ``modelName`` most
    GPUs report, as a MIG table key: ``gpu_model_of``); the batch runs that happened
    (each a job arriving when it did, with its GPUs and length: ``observed_jobs``; a typical
    day's batch is a transform the user chooses, :mod:`analytics.whatif.transforms`).
    Everything else keeps its default and says so.

    Parameters
    ----------
    store:
        An open ``Store``.
    pool:
        Unused (the service's own pool is taken); kept for the CLI's signature.
    service:
        Inference service to model; default the one most often above its SLO.
    slos:
        Every service's p99 SLO (:func:`analytics.slo.resolve_slos`); without it the default.

    Raises
    ------
    NotEnoughDataError
        The range has no service with enough steps of traffic.
    """
    tl = store_timelines(store, TimelineConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms), wmap)
    obs = observe(tl.services, tl.pool, tl.holdings, service=service, step_s=step_s, slos=slos)
    return scenario_from(obs, slo_ms=slos.ms(obs.service) if slos is not None else None,
                         gpu_model=gpu_model_from(tl.facts.gpu_models))[0]


def calibrate_store(store: Any, *, service: str | None = None, start_ms: int | None = None,
                    end_ms: int | None = None, step_s: int = 60,
                    slos: SloTable | None = None, wmap: Any = None,
                    observed_policy: str = "shared") -> Calibration:
    """``calibrate`` and ``backtest`` in one pass over the timelines; a calibration computed
    before (:func:`calibrate_timelines`' key) is read without reading the timelines."""
    cfg = TimelineConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms)
    origin = timelines_origin(store, cfg, wmap)
    if origin is not None:
        # The default service is named once per timelines and SLO table, a small result of its own.
        name = service or remembered(origin.scope, "default-service", (origin, slos),
                                     lambda: pick_service(store_timelines(store, cfg, wmap).services, slos))
        found = origin.peek("calibration", (name, step_s, slos, observed_policy))
        if found is not None:
            return found  # type: ignore[no-any-return]
    tl = store_timelines(store, cfg, wmap)
    return calibrate_timelines(tl, service=service,
                               step_s=step_s, slos=slos, observed_policy=observed_policy)
