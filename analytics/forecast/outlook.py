"""The forecast as the CLI, the page and the review ask for it: beside its backtest, with its actions.

:func:`forecast_timelines` answers from timelines already built (the app's cached ones);
:func:`forecast_store` reads them from the store through their one owner, with the store's Kueue
signals and its latest recorded change of policy. With the backtest (``with_backtest``) the
forecast's ranges are calibrated on the backtest's days before the moment: only then is a range
called an 80% range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from analytics.change.basis import kueue_signals
from analytics.change.record import PolicyChange, list_changes
from analytics.events.config import EventsConfig
from analytics.events.pipeline import analyse_timelines
from analytics.forecast.action import actions_for
from analytics.forecast.hindcast import MIN_HISTORY_DAYS, Backtest, backtest
from analytics.forecast.frames import DAY_MS, span_ms, store_frames
from analytics.forecast.horizon import Forecast, ForecastConfig
from analytics.forecast.model import forecast
from analytics.forecast.minutes_range import Calibrations
from analytics.slo import SloTable, resolve_slos
from analytics.timeline import Timelines
from analytics.times import iso_utc

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap


@dataclass
class ForecastAnswer:
    """The forecast, its actions (on it), and the backtest beside it (when asked for)."""

    forecast: Forecast
    backtest: Backtest | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"forecast": self.forecast.as_json()}
        if self.backtest is not None:
            out |= self.backtest.as_json()
        return out


def _moment(at_ms: int) -> str:
    """Which of the backtest's moments a forecast made at ``at_ms`` is like (its ranges' calibration)."""
    return "evening" if (at_ms % DAY_MS) >= 12 * 3_600_000 else "morning"


def ranges_from(bt: Backtest, at_ms: int) -> Calibrations:
    """The calibration of a forecast at ``at_ms`` from the backtest's days before it, at the same moment."""
    name = _moment(at_ms)
    rows: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for r in bt.rows:
        m = r.moments.get(name)
        if m is None or m["raw_range"] is None or m["at"] >= iso_utc(at_ms):
            continue
        for kind, raw, y in [("day", m["raw_range"], m["minutes_observed"])] + [
                ("service", v["raw"], v["observed"]) for v in m["by_service"].values() if v.get("raw")]:
            lo, hi, obs = rows.setdefault(kind, ([], [], []))
            lo.append(raw[0])
            hi.append(raw[1])
            obs.append(y)
    return Calibrations.fit(rows)


def forecast_timelines(tl: Timelines, *, slos: SloTable, at_ms: int | None = None,
                       cfg: ForecastConfig = ForecastConfig(), kueue: pl.DataFrame | None = None,
                       change: PolicyChange | None = None, with_backtest: bool = False,
                       calibrations: dict[tuple[Any, ...], Any] | None = None,
                       history_days: float = MIN_HISTORY_DAYS) -> ForecastAnswer:
    """The forecast at ``at_ms`` (default: the timelines' end) with its actions, and its backtest
    over the days before it when asked (the tail events it scores against computed here)."""
    calibrations = {} if calibrations is None else calibrations
    bt = None
    cal = None
    if with_backtest:
        events = analyse_timelines(tl, EventsConfig(step_s=cfg.step_s), slos=slos)
        bt = backtest(tl, slos=slos, events=events, kueue=kueue, change=change, cfg=cfg, calibrations=calibrations,
                      min_history_days=history_days)
        span = span_ms(tl)
        cal = ranges_from(bt, at_ms if at_ms is not None else (span[1] if span else 0))
    fc = forecast(tl, slos=slos, at_ms=at_ms, cfg=cfg, kueue=kueue, change=change, calibrations=calibrations,
                  calibrate_ranges=cal)
    actions_for(fc)
    fc.context = None  # the replays behind it: not kept (the page's cache would store every outcome's)
    return ForecastAnswer(fc, bt)


def latest_change(store: "Store", at_ms: int | None) -> PolicyChange | None:
    """The last change of policy recorded at or before ``at_ms`` (any, without it)."""
    changes = [c for c in list_changes(store) if at_ms is None or c.at_ms <= at_ms]
    return max(changes, key=lambda c: c.at_ms) if changes else None


def forecast_store(store: "Store", *, at_ms: int | None = None, cfg: ForecastConfig = ForecastConfig(),
                   slos: SloTable | None = None, wmap: "WorkloadMap | None" = None,
                   with_backtest: bool = False, history_days: float = MIN_HISTORY_DAYS) -> ForecastAnswer:
    """:func:`forecast_timelines` on the store's timelines (their owner's), Kueue signals and latest change."""
    tl = store_frames(store, cfg.step_s, wmap)
    table = slos if slos is not None else resolve_slos(store)
    return forecast_timelines(tl, slos=table, at_ms=at_ms, cfg=cfg, kueue=kueue_signals(store),
                              change=latest_change(store, at_ms), with_backtest=with_backtest,
                              history_days=history_days)
