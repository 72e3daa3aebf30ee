"""``simulate()``: one seeded run of a scenario plus its counterfactual re-runs, and its truth.

A run may be of an export variant (:mod:`analytics.sample.variants`): the cluster-shape ones
adjust the scenario here, before simulating; the export ones only change what
:mod:`analytics.sample.series` writes, and are recorded on the result for it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from analytics.errors import ConfigError
from analytics.sample.batch import plan_jobs
from analytics.sample.cluster import GPUS_PER_NODE, PoolChange, ScenarioConfig, Topology, build_topology
from analytics.sample.faults import Fault, degraded_replicas, plan_faults
from analytics.sample.latency import LatencyDraws, Uniforms, draw_latency
from analytics.sample.pool import plan_dev_pods, run_pool
from analytics.sample.result import SimResult, Variant
from analytics.sample.scenarios import SCENARIOS
from analytics.sample.traffic import MIN_PER_DAY, Surge, ar1_noise, arrivals, plan_surges, rhythm, surge_multiplier
from analytics.sample.truth import VARIANTS, classify, detect_runs, shares
from analytics.sample.variants import configure_scenario, parse_variants
from analytics.times import iso_utc as iso  # the truth's times: the one formatter
from analytics.times import parse_iso

# Random stream ids: one stream per purpose, so a counterfactual changes nothing else.
_STREAM = {"traffic": 1, "arrivals": 2, "surges": 3, "batch": 4, "names": 5, "dev": 6,
           "split": 7, "faults": 8, "latency": 10, "warmup": 11}



def _rng(seed: int, stream: str, sub: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAM[stream], sub])


def _run_variant(sc: ScenarioConfig, topo: Topology, days: int, seed: int, *, batch: bool,
                 surges_on: bool, keep_draws: bool, uniforms: dict[str, Uniforms],
                 faults: list[Fault] = ()) -> tuple[Variant, list[Surge]]:
    n_min = days * MIN_PER_DAY
    start_ord = parse_iso(sc.start_iso).date().toordinal()
    surges = plan_surges(sc, days, _rng(seed, "surges"))
    active_surges = surges if surges_on else []
    rate, req = {}, {}
    for i, svc in enumerate(sc.services):
        t_rng = _rng(seed, "traffic", i)
        noise = ar1_noise(t_rng, n_min, svc.noise_sigma)
        day_level = np.repeat(t_rng.normal(0.0, 0.04, days), MIN_PER_DAY)
        base = svc.peak_rps * rhythm(svc, sc, days) * np.exp(noise + day_level)
        r = base * surge_multiplier(active_surges, svc.name, n_min, sc.surges.rise_min)
        rate[svc.name] = r
        req[svc.name] = arrivals(r, _rng(seed, "arrivals", i).standard_normal(n_min))
    jobs = plan_jobs(sc.batch, days, start_ord, _rng(seed, "batch")) if batch else []
    warm = {svc.name: _rng(seed, "warmup", i).integers(svc.warmup_min, svc.warmup_max_min + 1,
                                                        size=(n_min, svc.max_replicas))
            for i, svc in enumerate(sc.services) if svc.warmup_max_min > svc.warmup_min}
    pool = run_pool(sc, topo, n_min, req, jobs, _rng(seed, "names"), warm)
    lat = {}
    for i, svc in enumerate(sc.services):
        u = uniforms[svc.name]
        serving = (pool.serving[svc.name] >= 0).sum(axis=1)
        d = _draw(svc, req[svc.name], serving, u, faults, n_min)
        if not keep_draws:
            d.main_s = d.e2e_s = None  # type: ignore[assignment]
        lat[svc.name] = d
    return Variant(pool=pool, rate_rps=rate, requests=req, latency=lat), surges


def _draw(svc, n_req: np.ndarray, serving: np.ndarray, u: Uniforms, faults: list[Fault] | tuple,
          n_min: int) -> LatencyDraws:
    """The service's latency draws, with its degraded replicas when it has any."""
    mine = [f for f in faults if f.service == svc.name]
    if not mine:  # (the default's call untouched: its output stays bit for bit)
        return draw_latency(svc, n_req, serving, u)
    return draw_latency(svc, n_req, serving, u, degraded=degraded_replicas(mine, svc.name, n_min),
                        fault_slowdown=mine[0].slowdown)


def simulate(scenario: str = "morning", *, days: int = 21, gpus: int = 64, seed: int = 7,
             variants: tuple[str, ...] = (), change: PoolChange | None = None) -> SimResult:
    """Simulate ``scenario`` over ``days`` on ``gpus`` GPUs; deterministic for a seed.

    Runs the scenario and three counterfactuals (without batch, without surges, without either)
    on the same random draws, and decides each tail event's cause from them (see
    :mod:`analytics.sample.truth`).

    Parameters
    ----------
    variants:
        Export variants (:data:`analytics.sample.variants.VARIANTS`), in any order; the result
        records them in canonical order. ``()`` is the default cluster.
    change:
        The day the pool changes from shared to another policy (:class:`PoolChange`); the
        truth then says what it was and the minutes over the SLO before and after it.

    Raises
    ------
    ConfigError
        Unknown scenario or variant, contradictory variants, fewer than 1 day, or a GPU count
        the topology cannot hold.
    """
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    if days < 1:
        raise ConfigError(f"--days {days}: simulate at least 1 day (21 or more to show a weekly rhythm)")
    names = parse_variants(variants)
    sc = configure_scenario(SCENARIOS[scenario], names)
    if change is not None:
        change.validate(days)
        if sc.inference_reserved_gpus:
            raise ConfigError(f"scenario {scenario!r} is partitioned from its start: change a shared one")
        sc = replace(sc, change=change)
        if change.weekly_surges:
            sc = replace(sc, surges=replace(sc.surges, weekly=True))
    for svc in sc.services:
        if not 1 <= svc.gpus_per_replica <= GPUS_PER_NODE:  # a replica's GPUs share one node
            raise ConfigError(f"service {svc.name}: gpus_per_replica {svc.gpus_per_replica}; "
                              f"use 1 to {GPUS_PER_NODE} (the GPUs of one node)")
    topo = build_topology(gpus)
    # the latency randomness is the same in every run (common random numbers): draw it once
    uniforms = {svc.name: Uniforms.draw(_rng(seed, "latency", i), days * MIN_PER_DAY)
                for i, svc in enumerate(sc.services)}
    faults = plan_faults(sc, days, _rng(seed, "faults"))
    full, surges = _run_variant(sc, topo, days, seed, batch=True, surges_on=True, keep_draws=True,
                                uniforms=uniforms, faults=faults)
    p99 = {"full": {s: d.p99_ms for s, d in full.latency.items()}}
    for name, b, s in (("no_batch", False, True), ("no_surge", True, False), ("neither", False, False)):
        v, _ = _run_variant(sc, topo, days, seed, batch=b, surges_on=s, keep_draws=False, uniforms=uniforms,
                            faults=faults)
        p99[name] = {k: d.p99_ms for k, d in v.latency.items()}
    if faults:
        # Faults change latency only (the autoscaler scales on requests): the run without them
        # is the full run's pool with its latency drawn again, healthy.
        p99["no_fault"] = {svc.name: draw_latency(svc, full.requests[svc.name],
                                                  (full.pool.serving[svc.name] >= 0).sum(axis=1),
                                                  uniforms[svc.name]).p99_ms for svc in sc.services}
    start_ms = int(parse_iso(sc.start_iso).timestamp() * 1000)
    res = SimResult(scenario=sc, days=days, gpus=gpus, seed=seed, start_ms=start_ms, topology=topo,
                    full=full, surges=surges, p99_variants=p99, variants=names, faults=faults)
    res.events = _events(res)
    res.dev_pods = plan_dev_pods(topo, res.n_min, _rng(seed, "dev"), len(full.pool.pods))
    return res


def _events(res: SimResult) -> list[dict[str, Any]]:
    sc = res.scenario
    ts = res.ts_ms()
    step_ms = sc.scrape_s * 1000
    out = []
    for svc in sc.services:
        full = res.p99_variants["full"][svc.name]
        runs = detect_runs(full, svc.slo_p99_ms, sc.min_event_min, sc.merge_gap_min)
        variants = {v: res.p99_variants[v][svc.name] for v in VARIANTS}
        if "no_fault" in res.p99_variants:
            variants["no_fault"] = res.p99_variants["no_fault"][svc.name]
        v_runs = {v: detect_runs(p, svc.slo_p99_ms, sc.min_event_min, sc.merge_gap_min)
                  for v, p in variants.items()}
        for a, b in runs:
            cause, info = classify(a, b, svc.slo_p99_ms, full, variants, v_runs)
            share = shares(a, b, full, variants)
            start = int(ts[a])
            minute_of_day = a % MIN_PER_DAY
            ramp = int(sc.ramp_hour_utc * 60)
            weekday = (a // MIN_PER_DAY) % 7 < 5
            on_ramp = weekday and ramp - 30 <= minute_of_day < ramp + 120
            out.append({
                "id": f"{svc.name}-{iso(start).replace('-', '').replace(':', '')[:13]}Z",
                "service": svc.name, "start": iso(start), "end": iso(start + (b - a) * step_ms),
                "start_ms": start, "end_ms": start + (b - a) * step_ms, "minutes": b - a,
                "peak_p99_ms": round(float(np.nanmax(full[a:b])), 1), "slo_p99_ms": svc.slo_p99_ms,
                "cause": cause, "misattributable_by_dashboard": bool(cause == "batch_contention" and on_ramp),
                "shares": share, "counterfactual": info})
    out.sort(key=lambda e: (e["start_ms"], e["service"]))
    return out
