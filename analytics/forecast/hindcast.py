"""The forecast scored on its own past: each day of a store, forecast the evening before and at 07:00.

For every day with a week of history before it, :func:`backtest` makes the forecast at 18:00 UTC
the day before and its update at 07:00 UTC that day, each from the steps that had ended by then
(nothing later), and sets beside them what happened:

- **a collision**: a tail event (:mod:`analytics.events`, over the whole store, the Tail events
  page's) starting in the forecast's part of the day with at least :data:`BATCH_SHARE` of its
  excess on batch (``batch_contention``, or ``mixed``);
- **the minutes over the SLO**: every service's, in the same part of the day
  (:func:`analytics.measures.minutes_over_slo`).

The probabilities are scored by Brier beside two baselines anyone could make without the
forecast, from the same store's earlier days: the **weekday's base rate** (the share of the
earlier days of the same day of the week that collided; of all earlier days while there is none)
and **as the same weekday last week** (1 if it collided, 0 if not), and by their reliability
(:mod:`analytics.forecast.skill`). Every 80% range is scored by its coverage: the day's minutes,
each service's, each service's traffic band, and each run's end. A day's minutes range is
calibrated on the earlier days of the backtest (:mod:`analytics.forecast.minutes_range`): the first days
have too few to calibrate on, and their raw spread is scored separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np
import polars as pl

from analytics.change.record import PolicyChange
from analytics.events.analysis import EventsAnalysis
from analytics.events.config import EventsConfig
from analytics.forecast.runs_ahead import PastRun, past_runs, quantile_levels
from analytics.forecast.frames import DAY_MS, span_ms
from analytics.forecast.horizon import Forecast, ForecastConfig
from analytics.forecast.model import forecast, slo_of
from analytics.forecast.minutes_range import Calibrations
from analytics.forecast.skill import brier, errors, reliability
from analytics.measures import minutes_over_slo
from analytics.slo import SloTable
from analytics.timeline import Timelines
from analytics.times import iso_utc
from analytics.whatif.observe import observe

EVENING_H = -6.0  # 18:00 the day before
MORNING_H = 7.0
MOMENTS = (("evening", EVENING_H), ("morning", MORNING_H))
MIN_HISTORY_DAYS = 7.0
BATCH_SHARE = EventsConfig.mixed_share  # the events' own threshold for a share to count (a `mixed` event has both)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass
class DayRow:
    """One day: each moment's forecast and what happened, and the two baselines."""

    day: str
    weekday: str
    moments: dict[str, dict[str, Any]]
    base_rate: float
    last_week: float | None

    def as_json(self) -> dict[str, Any]:
        ev, mo = self.moments.get("evening", {}), self.moments.get("morning", {})
        return {"day": self.day, "weekday": self.weekday,
                "collision_probability": ev.get("probability"), "collision_observed": ev.get("observed"),
                **_moment_json(ev), "baseline_weekday_rate": round(self.base_rate, 4),
                "baseline_last_week": self.last_week,
                "update_0700": {"collision_probability": mo.get("probability"), "collision_observed": mo.get("observed"),
                                **_moment_json(mo)}}


def _moment_json(m: dict[str, Any]) -> dict[str, Any]:
    return {"minutes_forecast": m.get("minutes_expected"), "minutes_range": m.get("minutes_range"),
            "minutes_range_calibrated": m.get("calibrated"), "minutes_raw_range": m.get("raw_range"),
            "minutes_observed": m.get("minutes_observed"), "by_service": m.get("by_service")}


@dataclass
class Backtest:
    """Every day's row and the scores (see the module)."""

    rows: list[DayRow]
    scores: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"days": [r.as_json() for r in self.rows], "scores": self.scores, "notes": self.notes}


def observed_collisions(events: EventsAnalysis | None) -> list[tuple[int, str]]:
    """The tail events with at least :data:`BATCH_SHARE` of their excess on batch: (start, service)."""
    if events is None:
        return []
    return sorted((int(e.start_ms), e.service) for e in events.events
                  if float(e.shares.get("batch_contention", 0.0)) >= BATCH_SHARE)


def observed_minutes(services: pl.DataFrame, slo_ms: Mapping[str, float], lo_ms: int, hi_ms: int,
                     step_s: int) -> dict[str, float]:
    """Each service's minutes over its SLO (``slo_ms``: the services and the SLO each is judged by)
    on the steps ending in ``(lo_ms, hi_ms]``."""
    part = services.filter((pl.col("ts").dt.epoch("ms") > lo_ms) & (pl.col("ts").dt.epoch("ms") <= hi_ms))
    out = {}
    for s in sorted(slo_ms):
        g = part.filter(pl.col("service") == s)
        busy = g["rps"].fill_null(0.0).to_numpy() > 0
        out[s] = minutes_over_slo(np.where(busy, g["p99_ms"].fill_null(np.nan).to_numpy(), np.nan), slo_ms[s],
                                  step_s=step_s)
    return out


def _band_hits(fc: Forecast, services: pl.DataFrame, lo_ms: int, hi_ms: int) -> tuple[int, int]:
    """Steps of the day whose observed traffic was inside the forecast's band, of those observed."""
    obs = services.select(pl.col("ts").dt.epoch("ms").alias("ts_ms"), "service", "rps")
    j = (fc.traffic.filter((pl.col("ts_ms") > lo_ms) & (pl.col("ts_ms") <= hi_ms))
         .join(obs, on=["ts_ms", "service"], how="inner").filter(pl.col("rps").is_not_null()))
    inside = j.filter((pl.col("rps") >= pl.col("lower")) & (pl.col("rps") <= pl.col("upper"))).height
    return inside, j.height


def _end_hits(fc: Forecast, day: int, actual: list[PastRun]) -> list[bool]:
    """For each run of ``day`` the forecast gave an end for and that ran: was its end inside the
    forecast's 80% range (the 10th to 90th percentile of its ends)?"""
    out = []
    for r in fc.runs:
        if r.day != day:
            continue
        match = [a for a in actual if a.workload == r.workload and not a.running
                 and abs(a.start_ms - r.start_ms) <= 3 * 3_600_000]
        if not match:
            continue
        levels = quantile_levels(len(r.ends_ms))
        lo, hi = np.interp([0.1, 0.9], levels, np.asarray(r.ends_ms, float))
        out.append(bool(lo - fc.step_s * 1000 <= match[0].end_ms <= hi + fc.step_s * 1000))
    return out


def backtest(tl: Timelines, *, slos: SloTable, events: EventsAnalysis | None,
             kueue: pl.DataFrame | None = None, change: PolicyChange | None = None,
             cfg: ForecastConfig = ForecastConfig(), min_history_days: float = MIN_HISTORY_DAYS,
             calibrations: dict[tuple[Any, ...], Any] | None = None) -> Backtest:
    """Forecast each day of the store as it would have been forecast, and score it (see the module).

    Parameters
    ----------
    tl:
        The store's timelines (its whole span).
    slos:
        Every service's SLO (the forecasts' and the minutes observed: :func:`analytics.forecast.model.slo_of`).
    events:
        The store's tail events (``analytics.events.pipeline.analyse_timelines``): what happened.
    calibrations:
        Kept service calibrations (one per service and week), shared with later forecasts.
    """
    span = span_ms(tl)
    if span is None:
        return Backtest([], {}, ["the store has no service steps"])
    step_s = cfg.step_s
    first_ms = span[0] - step_s * 1000
    calibrations = {} if calibrations is None else calibrations
    hit = observed_collisions(events)
    names = sorted(tl.services["service"].drop_nulls().unique().to_list())
    slo = {s: slo_of(slos, s) for s in names}
    actual = past_runs(observe(tl.services, tl.pool, tl.holdings, step_s=step_s)) if names else []
    days = [d for d in range(first_ms // DAY_MS, span[1] // DAY_MS + 1)
            if d * DAY_MS + EVENING_H * 3_600_000 - first_ms >= min_history_days * DAY_MS
            and (d + 1) * DAY_MS <= span[1] + step_s * 1000]
    past: dict[str, dict[str, tuple[list[float], list[float], list[float]]]] = {m: {} for m, _ in MOMENTS}
    whole: dict[int, bool] = {}
    rows: list[DayRow] = []
    band = {m: [0, 0] for m, _ in MOMENTS}
    ends: dict[str, list[bool]] = {m: [] for m, _ in MOMENTS}
    notes: list[str] = []
    for d in range(first_ms // DAY_MS, span[1] // DAY_MS + 1):
        whole[d] = any(d * DAY_MS <= t < (d + 1) * DAY_MS for t, _ in hit)
    for day in days:
        moments: dict[str, dict[str, Any]] = {}
        for name, hour in MOMENTS:
            at = int(day * DAY_MS + hour * 3_600_000)
            cal = Calibrations.fit({k: v for k, v in past[name].items()})
            horizon = ((day + 1) * DAY_MS - at) / 3_600_000
            fc = forecast(tl, slos=slos, at_ms=at,
                          cfg=replace(cfg, horizon_h=horizon), kueue=kueue, change=change,
                          calibrations=calibrations, calibrate_ranges=cal)
            target = next((x for x in fc.days if x.day == iso_utc(day * DAY_MS)[:10]), None)
            if target is None:
                continue
            mins = observed_minutes(tl.services, slo, target.start_ms, target.end_ms, step_s)
            seen = any(target.start_ms <= t < target.end_ms for t, _ in hit)
            total = float(sum(mins.values()))
            moments[name] = {
                "at": iso_utc(at), "probability": round(target.collision_probability, 4), "observed": seen,
                "minutes_expected": round(target.minutes_expected, 1), "minutes_observed": total,
                "minutes_range": list(target.minutes_range) if target.minutes_range else None,
                "raw_range": list(target.raw_range) if target.raw_range else None,
                "calibrated": cal.get("day") is not None,
                "by_service": {s: {"expected": round(target.minutes_by_service.get(s, 0.0), 1), "observed": mins[s],
                                   "range": list(target.range_by_service.get(s) or ()) or None,
                                   "raw": list(target.raw_by_service.get(s) or ()) or None,
                                   "calibrated": cal.get("service") is not None}
                               for s in mins if s in target.minutes_by_service}}
            _remember(past[name], "day", target.raw_range, total)
            for s in mins:
                if s in target.raw_by_service:
                    _remember(past[name], "service", target.raw_by_service[s], mins[s])
            a, b = _band_hits(fc, tl.services, target.start_ms, target.end_ms)
            band[name][0] += a
            band[name][1] += b
            ends[name].extend(_end_hits(fc, day, actual))
        base, last = baselines(whole, day, first_ms)
        rows.append(DayRow(iso_utc(day * DAY_MS)[:10], WEEKDAYS[(day + 3) % 7], moments, base, last))
    out = Backtest(rows, score_rows(rows, band, ends), notes)
    if events is None:
        out.notes.append("no tail events: collisions observed are none (the events analysis did not run)")
    return out


def baselines(collided: dict[int, bool], day: int, first_ms: int) -> tuple[float, float | None]:
    """The two forecasts anyone could make for ``day`` (epoch days) from the store's earlier whole
    days (``collided``: did each collide; a day that began before ``first_ms`` is not whole): the
    share of the earlier days of the same day of the week that collided (of all earlier days while
    there is none; a half with none at all), and 1 or 0 as the same weekday a week before did
    (None when the store does not have it).

    >>> seen = {0: True, 1: False, 2: True, 7: False, 8: True}  # from Thursday 1970-01-01
    >>> baselines(seen, 14, -1), baselines(seen, 9, -1), baselines(seen, 3, -1), baselines(seen, 0, -1)
    ((0.5, 0.0), (1.0, 1.0), (0.6666666666666666, None), (0.5, None))
    """
    whole = {d: c for d, c in collided.items() if d < day and d * DAY_MS > first_ms}
    same = [c for d, c in whole.items() if (d - day) % 7 == 0]
    base = float(np.mean(same)) if same else (float(np.mean(list(whole.values()))) if whole else 0.5)
    last = float(whole[day - 7]) if (day - 7) in whole else None
    return base, last


def _remember(past: dict[str, tuple[list[float], list[float], list[float]]], kind: str,
              raw: tuple[float, float] | None, observed: float) -> None:
    if raw is None:
        return
    lo, hi, y = past.setdefault(kind, ([], [], []))
    lo.append(raw[0])
    hi.append(raw[1])
    y.append(observed)


def score_rows(rows: list[DayRow], band: dict[str, list[int]], ends: dict[str, list[bool]]) -> dict[str, Any]:
    """The scores of a backtest's rows (see the module)."""
    out: dict[str, Any] = {"days": len(rows)}
    both = [r for r in rows if "evening" in r.moments]
    y = np.array([r.moments["evening"]["observed"] for r in both], float)
    out["collided"] = int(y.sum())
    out["brier"] = {
        "evening": brier(np.array([r.moments["evening"]["probability"] for r in both]), y),
        "weekday_base_rate": brier(np.array([r.base_rate for r in both]), y),
        "last_week": brier(np.array([r.last_week if r.last_week is not None else r.base_rate for r in both]), y)}
    mo = [r for r in rows if "morning" in r.moments]
    ym = np.array([r.moments["morning"]["observed"] for r in mo], float)
    out["brier"]["morning"] = brier(np.array([r.moments["morning"]["probability"] for r in mo]), ym)
    out["reliability"] = {name: reliability(np.array([r.moments[name]["probability"] for r in rows if name in r.moments]),
                                            np.array([r.moments[name]["observed"] for r in rows if name in r.moments], float))
                          for name, _ in MOMENTS}
    out["minutes"], out["coverage"] = {}, {}
    for name, _ in MOMENTS:
        ms = [r.moments[name] for r in rows if name in r.moments]
        out["minutes"][name] = errors(np.array([m["minutes_expected"] for m in ms]),
                                      np.array([m["minutes_observed"] for m in ms]))
        out["coverage"][name] = range_coverage([{"minutes_raw_range": m["raw_range"],
                                                  "minutes_observed": m["minutes_observed"],
                                                  "by_service": m["by_service"]} for m in ms]) | {
            "traffic_band": {"share": band[name][0] / band[name][1] if band[name][1] else None, "n": band[name][1]},
            "run_end": _share(ends[name])}
    return out


def range_coverage(days: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The coverage of one moment's minutes ranges over consecutive days (``minutes_raw_range``,
    ``minutes_observed``, ``by_service``: ``{service: {"raw", "observed"}}``), each day's range
    calibrated on the days before it as the backtest calibrates it (:class:`Calibrations`); days
    with too few before them are scored raw, apart (``day_minutes_raw``). The bench re-scores its
    kept rows with it."""
    past: dict[str, tuple[list[float], list[float], list[float]]] = {}
    hits: dict[str, list[bool]] = {"day_minutes": [], "service_minutes": [], "day_minutes_raw": []}
    for d in days:
        cal = Calibrations.fit(past)
        pairs = [("day", d.get("minutes_raw_range"), d.get("minutes_observed"))] + [
            ("service", v.get("raw"), v.get("observed")) for v in (d.get("by_service") or {}).values()]
        for kind, raw, y in pairs:
            if not raw or y is None:
                continue
            c = cal.get(kind)
            if c is not None:
                lo, hi = c.apply(raw[0], raw[1])
                hits["day_minutes" if kind == "day" else "service_minutes"].append(lo <= y <= hi)
            elif kind == "day":
                hits["day_minutes_raw"].append(raw[0] <= y <= raw[1])
        for kind, raw, y in pairs:
            if raw and y is not None:
                _remember(past, kind, raw, y)
    return {k: _share(v) for k, v in hits.items()}


def _share(hits: list[bool]) -> dict[str, Any]:
    return {"share": float(np.mean(hits)) if hits else None, "n": len(hits)}
