"""The forecast: for a moment and a horizon, when each service will collide with the batch.

:func:`forecast` reads the timelines up to the moment (nothing after), and for the horizon ahead:

1. each service's traffic by step from its rhythm (:func:`analytics.rhythm.norm_ahead`: the
   typical day of its kind at the recent level, with the one-day-ahead spread as its band);
2. the batch that will hold GPUs (:mod:`analytics.forecast.runs_ahead`): runs still running and their
   likely end, recurring workloads' likely next runs, Kueue's queue beyond the usual;
3. the GPUs others hold: the pool's other services and other classes, and the batch that does not
   recur, at what they held at that time of day on past days of the same kind;
4. for each day of the horizon, its outcomes (:mod:`analytics.forecast.outcomes`) replayed by
   the what-if on the service as calibrated from the store (:mod:`analytics.forecast.replay`),
   and the same horizon without the runs: a **collision** is a stretch where the runs raise the
   chance a step reads over the SLO by more than a half, at least as long as a tail event and
   merged across the same gaps (``EventsConfig``'s); its probability is the weight of the
   outcomes it happens in;
5. the minutes over the SLO each day is expected to have (the outcomes' replayed minutes, plus
   the minutes the store's past days of the same kind had away from those runs: surges, faults),
   with a range (:mod:`analytics.forecast.minutes_range`).

The service's calibration (the what-if's, :func:`analytics.whatif.calibrate.scenario_from`) is
made on the whole days before the moment (:func:`calibration_window`: refreshed at most once a day,
and once a week when the store has a week), and kept, so that the moments that share it do not
calibrate again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from analytics.change.record import PolicyChange, apply_change
from analytics.errors import ConfigError, NotEnoughDataError
from analytics.events.config import EventsConfig
from analytics.events.detect import detect_runs
from analytics.forecast.horizon import CollisionWindow, DayForecast, Forecast, ForecastConfig
from analytics.forecast.runs_ahead import LARGE_GPUS, LARGE_SHARE, BatchOutlook, RunAhead, batch_outlook, quantile_levels
from analytics.forecast.frames import DAY_MS, known_at, span_ms
from analytics.forecast.outcomes import Outcome, day_outcomes
from analytics.forecast.profile import profile_ahead, weekend
from analytics.forecast.minutes_range import calibrate_range, raw_range
from analytics.forecast.replay import HorizonReplays, held_mask, horizon_scenario, outcome_jobs
from analytics.measures import over_slo, step_minutes, weighted_quantile
from analytics.rhythm import norm_ahead
from analytics.slo import SloTable
from analytics.timeline import Timelines
from analytics.times import iso_utc
from analytics.whatif.calibrate import gpu_model_from, scenario_from
from analytics.whatif.observe import Observation, observe
from analytics.whatif.params import PoolScenario, ServiceParams

HALF_DAY_MS = DAY_MS // 2
RAISED = 0.5  # the runs raise a step's chance of reading over the SLO by more than this: a collision step
AFTER_RUN_H = 3.0  # a service is still recovering this long after a run let go (not background minutes)


@dataclass
class ServiceAhead:
    """What one service's forecast replays on: its observation, calibrated scenario and replays."""

    service: str
    pool: str
    slo_ms: float
    obs: Observation
    replays: HorizonReplays
    traffic: pl.DataFrame
    counterfactual: np.ndarray  # violation chances without the runs ahead
    background: pl.DataFrame  # day, weekend, minutes over the SLO away from the runs


@dataclass
class Context:
    """What a forecast's outcomes were replayed on (the actions replay on it too)."""

    ahead_ms: np.ndarray
    at_ms: int
    step_s: int
    outlooks: dict[str, BatchOutlook]
    services: dict[str, ServiceAhead]
    levels: int
    events: EventsConfig

    def runs(self, pool: str) -> list[RunAhead]:
        return self.outlooks[pool].runs


def calibration_window(first_ms: int, at_ms: int, days: float) -> tuple[int, int]:
    """The steps the service's model is calibrated on for a forecast made at ``at_ms``: the whole
    days before the last midnight at least 12 hours past (so a forecast at 18:00 and its 07:00
    update share one), and once the store has ``days`` of them, the last whole week of weeks
    counted from ``first_ms``. Less than a day: everything up to ``at_ms``.

    >>> [tuple(x // DAY_MS for x in calibration_window(0, int(d * DAY_MS), 7)) for d in (1.75, 2.3, 6.75, 10.0)]
    [(0, 1), (0, 1), (0, 6), (0, 7)]
    """
    known = at_ms - HALF_DAY_MS - first_ms
    week = int(days * DAY_MS)
    if known < DAY_MS:
        return first_ms, at_ms
    if known < week:
        return first_ms, first_ms + (known // DAY_MS) * DAY_MS
    end = first_ms + (known // week) * week
    return end - week, end


_CALIBRATIONS: "OrderedDict[tuple[Any, ...], PoolScenario]" = OrderedDict()
_CAL_LOCK = threading.Lock()
CALIBRATIONS_KEPT = 16


def _fingerprint(tl: Timelines) -> tuple[Any, ...]:
    """What identifies a window's frames (their rows' hashes summed): the same steps calibrate the same."""
    return tuple((x.height, int(x.hash_rows().sum())) for x in (tl.services, tl.pool, tl.holdings))


def slo_of(slos: SloTable, service: str) -> float:
    """The SLO the forecast judges ``service`` by: the table's, else the what-if's default (the SLO
    its calibration replays a service nothing names with)."""
    ms = slos.ms(service)
    return float(ms) if ms else float(ServiceParams().slo_ms)


def calibrated_scenario(tl: Timelines, service: str, window: tuple[int, int], step_s: int, slo_ms: float,
                        calibrations: dict[tuple[Any, ...], PoolScenario] | None = None) -> PoolScenario:
    """The what-if's calibration of ``service`` on ``window`` (:func:`analytics.whatif.calibrate.scenario_from`),
    kept in ``calibrations`` and in the process (the last :data:`CALIBRATIONS_KEPT`, by the window's
    content): the CLI, the review and the page's forecast and backtest ask for the same ones."""
    f = known_at(tl, step_s, window[1], (window[1] - window[0]) / DAY_MS)
    key = (service, window, step_s, slo_ms, _fingerprint(f))
    if calibrations is not None and key in calibrations:
        return calibrations[key]
    with _CAL_LOCK:
        scn = _CALIBRATIONS.get(key)
        if scn is not None:
            _CALIBRATIONS.move_to_end(key)
    if scn is None:
        obs = observe(f.services, f.pool, f.holdings, service=service, step_s=step_s)
        scn, _ = scenario_from(obs, slo_ms=slo_ms, gpu_model=gpu_model_from(f.facts.gpu_models))
        with _CAL_LOCK:
            _CALIBRATIONS[key] = scn
            while len(_CALIBRATIONS) > CALIBRATIONS_KEPT:
                _CALIBRATIONS.popitem(last=False)
    if calibrations is not None:
        calibrations[key] = scn
    return scn


def runs_held(obs: Observation, recurring: set[str], large_gpus: float, after_steps: int = 0) -> np.ndarray:
    """The known steps a run the forecast replays held GPUs (a recurring or a large one), and
    ``after_steps`` after each."""
    held = np.zeros(obs.steps, bool)
    for r in obs.runs:
        if r.workload in recurring or r.gpus >= large_gpus:
            held[r.start:min(obs.steps, r.end + after_steps)] = True
    return held


def background_minutes(obs: Observation, covered_by: set[str], large_gpus: float, slo_ms: float) -> pl.DataFrame:
    """Per past UTC day with all its steps: the minutes over the SLO away from the runs the forecast
    replays (while they held GPUs and for ``AFTER_RUN_H`` after): what surges and faults add."""
    covered = runs_held(obs, covered_by, large_gpus, int(AFTER_RUN_H * 3600 / obs.step_s))
    over = over_slo(obs.p99_ms, slo_ms) & ~covered & (obs.rps > 0)
    day = (obs.ts_ms - 1) // DAY_MS
    f = (pl.DataFrame({"day": day, "over": over}).group_by("day")
         .agg(pl.col("over").sum().alias("n"), pl.len().alias("steps")))
    whole = f.filter(pl.col("steps") >= 0.9 * (86_400 // obs.step_s))
    return whole.select("day", pl.Series("minutes", step_minutes(whole["n"].to_numpy(), step_s=obs.step_s)),
                        pl.Series("weekend", weekend(whole["day"].to_numpy() * DAY_MS + 1))).sort("day")


def forecast(tl: Timelines, *, slos: SloTable, at_ms: int | None = None,
             cfg: ForecastConfig = ForecastConfig(), kueue: pl.DataFrame | None = None,
             change: PolicyChange | None = None,
             calibrations: dict[tuple[Any, ...], PoolScenario] | None = None,
             calibrate_ranges: Any = None) -> Forecast:
    """Forecast the collisions of the horizon after ``at_ms`` (default: the store's last step).

    Parameters
    ----------
    tl:
        The store's timelines (``analytics.timeline.store_timelines``); only the steps that ended
        by ``at_ms`` are read.
    slos:
        Every service's p99 SLO (a service the table gives none is judged by the what-if's
        default, :func:`slo_of`).
    kueue:
        ``ts_ms, pending`` of Kueue's pending workloads (``analytics.change.basis.kueue_signals``).
    change:
        The pool's policy as last recorded (``analytics.change.list_changes``); the horizon is
        replayed under it (shared when none).
    calibrations:
        Kept calibrations (see the module); filled as they are made.
    calibrate_ranges:
        The past days' ranges and outcomes an 80% range is calibrated on
        (:func:`analytics.forecast.minutes_range.calibrate`); none: the raw spread, named as such.

    Raises
    ------
    NotEnoughDataError
        Fewer than ``cfg.min_history_days`` days before ``at_ms``, or no service with traffic.
    ConfigError
        ``at_ms`` outside the store's span.
    """
    cfg.validate()
    step_s = cfg.step_s
    span = span_ms(tl)
    if span is None:
        raise NotEnoughDataError("the store has no service steps: load request-rate and latency metrics first")
    first_ms = span[0] - step_s * 1000
    at = span[1] if at_ms is None else int(at_ms) // (step_s * 1000) * (step_s * 1000)
    if not first_ms < at <= span[1]:
        raise ConfigError(f"--at {iso_utc(at)}: outside the store's span {iso_utc(first_ms)} to {iso_utc(span[1])}; "
                          "give a time inside it (or leave --at out for the store's end)")
    if at - first_ms < cfg.min_history_days * DAY_MS:
        raise NotEnoughDataError(f"--at {iso_utc(at)}: {(at - first_ms) / DAY_MS:.1f} days of history before it; a "
                                 f"forecast needs {cfg.min_history_days:g} (the rhythm's typical day, the runs' history)")
    f = known_at(tl, step_s, at, cfg.history_days)
    step_ms = step_s * 1000
    n = int(round(cfg.horizon_h * 3600 / step_s))
    ahead = at + step_ms * np.arange(1, n + 1, dtype=np.int64)
    events = EventsConfig(step_s=step_s)
    levels = quantile_levels(cfg.levels)
    notes: list[str] = []
    names = sorted(f.services.filter(pl.col("rps").fill_null(0.0) > 0)["service"].drop_nulls().unique().to_list())
    policy = change.policy if change is not None else "shared"
    window = calibration_window(first_ms, at, cfg.calibration_days)
    obs_of: dict[str, Observation] = {}
    for s in names:
        try:
            obs_of[s] = observe(f.services, f.pool, f.holdings, service=s, step_s=step_s)
        except NotEnoughDataError as exc:
            notes.append(f"{s}: not forecast ({exc})")
    if not obs_of:
        raise NotEnoughDataError("no service has enough steps with traffic before --at to forecast")
    outlooks: dict[str, BatchOutlook] = {}
    for s, o in obs_of.items():
        if o.pool not in outlooks:
            outlooks[o.pool] = batch_outlook(o, ahead, levels, kueue=kueue)
            notes.extend(outlooks[o.pool].notes)
    services: dict[str, ServiceAhead] = {}
    for s, o in obs_of.items():
        slo = slo_of(slos, s)
        scn = calibrated_scenario(tl, s, window, step_s, slo, calibrations)
        if change is not None:
            scn = apply_change(scn, change)
        src = f.services.filter(pl.col("service") == s).select("ts", "rps")
        traffic = norm_ahead(src, "rps", ahead)
        # what the pool's other services and other classes held at that time of day on past days of
        # the same kind (the what-if's backtest keeps what they held, as observed), while a run held
        # GPUs and while none did, and the batch that does not recur
        large = max(LARGE_GPUS, LARGE_SHARE * float(scn.pool.gpus))
        held = runs_held(o, set(outlooks[o.pool].recurring), large)
        usual = profile_ahead(o.ts_ms, o.others_gpus, ahead)
        free, busy = (np.where(np.isnan(x), usual, x) for x in
                      (profile_ahead(o.ts_ms, o.others_gpus, ahead, where=w, fill=False) for w in (~held, held)))
        bg = outlooks[o.pool].background_gpus
        replays = HorizonReplays(horizon_scenario(scn, traffic["expected"].to_numpy(), free + bg, at, step_s), policy,
                                 others_run=np.clip(busy + bg, 0.0, float(scn.pool.gpus)))
        services[s] = ServiceAhead(s, o.pool, slo, o, replays, traffic.with_columns(pl.lit(s).alias("service")),
                                   replays.run(()).series["violation"],
                                   background_minutes(o, set(outlooks[o.pool].recurring), large, slo))
    ctx = Context(ahead, at, step_s, outlooks, services, cfg.levels, events)
    days = [_day(ctx, d, calibrate_ranges) for d in range(at // DAY_MS, (int(ahead[-1]) - 1) // DAY_MS + 1)]
    runs = sorted((r for o in outlooks.values() for r in o.runs), key=lambda r: (r.start_ms, r.workload))
    first_pool = next(iter(outlooks.values()))
    fc = Forecast(at, cfg.horizon_h, step_s, policy, {s: sa.slo_ms for s, sa in services.items()},
                  [d for d in days if d is not None], runs,
                  pl.concat([sa.traffic for sa in services.values()]), _capacity(ctx),
                  first_pool.pending_now, first_pool.pending_usual, notes, context=ctx)
    fc.range_basis = _range_basis(calibrate_ranges)
    return fc


def _range_basis(calibration: Any) -> str:
    if calibration is None:
        return ("not yet scored: the 10th to 90th percentile of the outcomes' replayed minutes with the past days' "
                "minutes away from the runs; run the backtest to calibrate it")
    return calibration.describe()


def _weighted_median(x: list[float], w: list[float]) -> float:
    return weighted_quantile(np.asarray(x, float), np.asarray(w, float), 0.5)


def _day(ctx: Context, day: int, calibration: Any) -> DayForecast | None:
    lo_ms, hi_ms = max(ctx.at_ms, day * DAY_MS), min((day + 1) * DAY_MS, int(ctx.ahead_ms[-1]))
    in_day = (ctx.ahead_ms > lo_ms) & (ctx.ahead_ms <= hi_ms)
    if not in_day.any():
        return None
    step_ms = ctx.step_s * 1000
    share = (hi_ms - lo_ms) / DAY_MS
    pools: dict[str, list[Outcome]] = {}
    notes: list[str] = []
    for pool in ctx.outlooks:
        pools[pool], more = day_outcomes(ctx.runs(pool), day, ctx.levels)
        notes.extend(more)
    # per outcome of each pool: which services collide, and their minutes
    per_service: dict[str, dict[str, Any]] = {}
    pool_hit: dict[str, np.ndarray] = {p: np.zeros(len(o), bool) for p, o in pools.items()}
    for s, sa in ctx.services.items():
        outs = pools[sa.pool]
        runs = ctx.runs(sa.pool)
        hits, mins, spans, who = [], [], [], []
        for o in outs:
            res = sa.replays.run(outcome_jobs(runs, o, ctx.at_ms, ctx.step_s),
                                 held_mask(runs, o, ctx.ahead_ms, ctx.at_ms))
            v = res.series["violation"]
            found = [(a, b) for a, b in detect_runs(ctx.ahead_ms, (v - sa.counterfactual) > RAISED, step_ms=step_ms,
                                                    min_duration_ms=int(ctx.events.min_duration_min * 60_000),
                                                    merge_gap_ms=int(ctx.events.merge_gap_min * 60_000))
                     if lo_ms <= a < hi_ms]
            hits.append(bool(found))
            mins.append(float(step_minutes(float(v[in_day].sum()), step_s=ctx.step_s)))
            spans.append((found[0][0], found[-1][1]) if found else None)
            who.append(_holders(res, runs, found, ctx) if found else [])
        pool_hit[sa.pool] |= np.array(hits, bool)
        per_service[s] = {"hit": np.array(hits), "minutes": np.array(mins), "spans": spans, "who": who,
                          "weights": np.array([o.weight for o in outs]),
                          "background": _background_for(sa.background, day, share)}
    # the day's chance that any service collides, pool by pool (pools' runs are independent)
    p_none = 1.0
    for p, outs in pools.items():
        w = np.array([o.weight for o in outs])
        p_none *= 1.0 - float((w * pool_hit[p]).sum())
    windows = []
    by_service, range_by_service, raw_by_service = {}, {}, {}
    for s, d in per_service.items():
        w = d["weights"]
        bg = d["background"]
        by_service[s] = float((w * d["minutes"]).sum()) + (float(bg.mean()) if bg.size else 0.0)
        raw_by_service[s] = raw_range(d["minutes"], w, bg, ctx.step_s)
        range_by_service[s] = calibrate_range(raw_by_service[s], ctx.step_s, calibration, "service")
        p = float((w * d["hit"]).sum())
        if p <= 0:
            continue
        idx = [i for i, h in enumerate(d["hit"]) if h]
        starts = [d["spans"][i][0] for i in idx]
        ends = [d["spans"][i][1] for i in idx]
        ws = [w[i] for i in idx]
        names = sorted({n for i in idx for n in d["who"][i]})
        windows.append(CollisionWindow(s, iso_utc(day * DAY_MS)[:10], int(_weighted_median(starts, ws)),
                                       int(_weighted_median(ends, ws)), int(min(starts)), int(max(ends)), p,
                                       by_service[s], range_by_service[s], names))
    # the day's total over services: the same outcome in each service of a pool, the same past day's background
    total_m, total_w = _total_draws(per_service, ctx)
    bg_days = _background_days(ctx, day, share)
    total_raw = raw_range(total_m, total_w, bg_days, ctx.step_s)
    expected = float(sum(by_service.values()))
    windows.sort(key=lambda x: (x.start_ms, x.service))
    return DayForecast(iso_utc(day * DAY_MS)[:10], lo_ms, hi_ms, 1.0 - p_none, expected,
                       calibrate_range(total_raw, ctx.step_s, calibration, "day"), by_service, range_by_service, windows,
                       sum(len(o) for o in pools.values()), total_raw, raw_by_service,
                       calibration is not None and calibration.get("day") is not None,
                       draws={"minutes": total_m, "weights": total_w, "background": bg_days, "notes": notes,
                              "per_service": {s: (d["minutes"], d["weights"], d["background"])
                                              for s, d in per_service.items()}})


def _total_draws(per_service: dict[str, dict[str, Any]], ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The day's minutes over every service per joint outcome (one pool: outcome by outcome)."""
    by_pool: dict[str, list[str]] = {}
    for s, sa in ctx.services.items():
        by_pool.setdefault(sa.pool, []).append(s)
    mins, weights = np.zeros(1), np.ones(1)
    for pool, names in by_pool.items():
        m = sum(per_service[s]["minutes"] for s in names)
        w = per_service[names[0]]["weights"]
        mins = (mins[:, None] + m[None, :]).ravel()
        weights = (weights[:, None] * w[None, :]).ravel()
    return mins, weights


def _background_for(bg: pl.DataFrame, day: int, share: float) -> np.ndarray:
    """The service's background minutes of past days of ``day``'s kind, scaled to the part ahead."""
    kind = bool(weekend(day * DAY_MS + 1)[0])
    same = bg.filter(pl.col("weekend") == kind)
    src = same if same.height else bg
    return src["minutes"].to_numpy() * share


def _background_days(ctx: Context, day: int, share: float) -> np.ndarray:
    """Past days' background minutes summed over the services (a past day's surges are one draw)."""
    kind = bool(weekend(day * DAY_MS + 1)[0])
    frames = [sa.background.select("day", "weekend", pl.col("minutes").alias(s)) for s, sa in ctx.services.items()]
    joined = frames[0]
    for fr in frames[1:]:
        joined = joined.join(fr.drop("weekend"), on="day", how="inner")
    if joined.height == 0:
        return np.zeros(0)
    same = joined.filter(pl.col("weekend") == kind)
    src = same if same.height else joined
    return src.select(pl.sum_horizontal(list(ctx.services))).to_series().to_numpy() * share


def _holders(res: Any, runs: list[RunAhead], found: list[tuple[int, int]], ctx: Context) -> list[str]:
    """The runs that held GPUs during the outcome's collisions (the replay's job rows)."""
    start_ms = int(ctx.ahead_ms[0])
    step_ms = ctx.step_s * 1000
    out = []
    for j in res.jobs:
        if j["first_start_step"] < 0:
            continue
        a = start_ms + (j["first_start_step"] - 1) * step_ms
        b = start_ms + (j["end_step"] if j["end_step"] >= 0 else len(ctx.ahead_ms)) * step_ms
        if any(a < e and s < b for s, e in found):
            out.append(j["job"].rsplit("#", 1)[0])
    return out


def _capacity(ctx: Context) -> pl.DataFrame:
    """The horizon's pool on its most likely outcome (each run present when more likely than not, at
    its median end): GPUs in the pool, held by others, by batch, and wanted by the services."""
    by_pool: dict[str, list[ServiceAhead]] = {}
    for sa in ctx.services.values():
        by_pool.setdefault(sa.pool, []).append(sa)
    frames = []
    for pool, sas in by_pool.items():
        runs = ctx.runs(pool)
        likely = Outcome(1.0, tuple(sorted((i, r.ends_ms[len(r.ends_ms) // 2]) for i, r in enumerate(runs)
                                           if r.probability >= 0.5)), -1)
        jobs = outcome_jobs(runs, likely, ctx.at_ms, ctx.step_s)
        first = sas[0].replays
        res = first.run(jobs, held_mask(runs, likely, ctx.ahead_ms, ctx.at_ms))
        # the other classes: the first service's others less the pool's other services' usual GPUs
        services_usual = sum((profile_ahead(o.obs.ts_ms, o.obs.own_gpus, ctx.ahead_ms) for o in sas[1:]),
                             np.zeros(len(ctx.ahead_ms)))
        base_others = np.asarray(first.base.others_gpus) - services_usual
        wanted = sum((o.replays.run(()).series["inference_gpus"] for o in sas), np.zeros(len(ctx.ahead_ms)))
        frames.append(pl.DataFrame({"ts_ms": ctx.ahead_ms, "pool": pool,
                                    "pool_gpus": np.full(len(ctx.ahead_ms), float(first.base.pool.gpus)),
                                    "others_gpus": np.clip(base_others, 0.0, None),
                                    "batch_gpus": res.series["batch_gpus"], "wanted_gpus": wanted}))
    return pl.concat(frames)
