"""``tidelens forecast``: tomorrow's collisions of inference with batch, the change tonight that avoids
each, and (``--backtest``) the forecast scored on every day of the store."""

from __future__ import annotations

import argparse
import re

import polars as pl

from analytics.cli.commands import command_help
from analytics.cli.common import (
    add_config,
    add_db,
    add_json,
    add_slos,
    check_zone,
    config_path,
    open_to_read,
    print_json,
    print_table,
)
from analytics.cli.progress import Progress
from analytics.errors import ConfigError
from analytics.forecast.hindcast import MIN_HISTORY_DAYS
from analytics.forecast.horizon import ForecastConfig
from analytics.forecast.outlook import forecast_store
from analytics.forecast.report import (
    ACTION_HEADER,
    BACKTEST_HEADER,
    RUN_HEADER,
    WINDOW_HEADER,
    action_rows,
    action_sentence,
    backtest_rows,
    day_sentence,
    run_rows,
    score_sentences,
    window_rows,
)
from analytics.slo import DEFAULT_SLO_MS, parse_service_slos, resolve_slos
from analytics.timeline import parse_step_s
from analytics.times import iso_utc, parse_time_ms
from analytics.workloads import load_map

_HOURS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(h|d)?\s*$")


def parse_horizon_h(text: str) -> float:
    """``--horizon``: hours (``36``, ``36h``) or days (``2d``).

    >>> parse_horizon_h("36"), parse_horizon_h("36h"), parse_horizon_h("2d")
    (36.0, 36.0, 48.0)
    """
    m = _HOURS.match(text)
    if not m:
        raise ConfigError(f"--horizon {text!r}: write hours (36, 36h) or days (2d)")
    return float(m.group(1)) * (24.0 if m.group(2) == "d" else 1.0)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("forecast", help=command_help("forecast"))
    add_db(p)
    p.add_argument("--at", default=None, metavar="TIME",
                   help="the moment the forecast is made (ISO-8601, epoch seconds, now-12h; default: the store's end)")
    p.add_argument("--horizon", default="36h", metavar="H", help="how far ahead: hours (36, 36h) or days (2d); default 36h")
    p.add_argument("--backtest", action="store_true",
                   help="also forecast every day of the store as it would have been (18:00 the day before and 07:00) "
                        "and score it against what happened; the forecast's ranges are then calibrated 80%% ranges")
    p.add_argument("--history-days", type=float, default=MIN_HISTORY_DAYS, metavar="DAYS",
                   help=f"--backtest: the days of history a day needs before it is scored (default {MIN_HISTORY_DAYS:g})")
    add_slos(p, f"p99 SLO in ms for every service (default: each service's from [slo] in tidelens.toml, else the "
                f"store's own, else {DEFAULT_SLO_MS:g} ms, as the app decides them)")
    p.add_argument("--step", default="1m", help="timeline step, e.g. 1m (default 1m)")
    p.add_argument("--tz", default="UTC", help="time zone the readable output shows clock times in (default UTC)")
    add_config(p, "[slo] and the workload map")
    add_json(p)
    p.set_defaults(func=cmd_forecast)


def cmd_forecast(args: argparse.Namespace) -> int:
    config = config_path(args)
    per_service = parse_service_slos(args.slo)
    at_ms = None if args.at is None else parse_time_ms(args.at, what="--at")
    cfg = ForecastConfig(horizon_h=parse_horizon_h(args.horizon), step_s=parse_step_s(args.step, "--step")).validate()
    check_zone(args.tz)
    if not 1.0 <= args.history_days <= 90.0:  # NaN fails both
        raise ConfigError(f"--history-days {args.history_days:g}: give 1 to 90 days")
    wmap = load_map(config)
    with Progress("forecast", args) as stage, open_to_read(args) as st:
        stage("forecasting the collisions ahead" + (" and scoring it on the store's days" if args.backtest else ""))
        slos = resolve_slos(st, config=config, every_ms=args.slo_ms, per_service=per_service,
                            per_service_source="--slo")
        answer = forecast_store(st, at_ms=at_ms, cfg=cfg, slos=slos, wmap=wmap, with_backtest=args.backtest,
                                history_days=args.history_days)
    if args.json:
        print_json(answer.as_json())
        return 0
    fc = answer.forecast
    print(f"Forecast made at {iso_utc(fc.at_ms)}, {fc.horizon_h:g} h ahead, under the {fc.policy} policy "
          f"(times in {args.tz}). Ranges: {fc.range_basis}.")
    for day in fc.days:
        print("- " + day_sentence(day, args.tz))
        act = action_sentence(fc, day, args.tz)
        if act:
            print("  " + act)
    if fc.runs:
        print("\nBatch runs ahead:")
        print_table(pl.DataFrame(run_rows(fc, args.tz), schema=RUN_HEADER, orient="row"))
    if fc.windows():
        print("\nCollision windows:")
        print_table(pl.DataFrame(window_rows(fc, args.tz), schema=WINDOW_HEADER, orient="row"))
    if fc.actions:
        print("\nChanges tonight, each the smallest that avoids the collision on the longest likely night:")
        print_table(pl.DataFrame(action_rows(fc), schema=ACTION_HEADER, orient="row"))
    for note in fc.notes:
        print(f"note: {note}")
    if answer.backtest is not None:
        print("\nBacktest: every day forecast the evening before (18:00) and at 07:00, against what happened")
        if answer.backtest.rows:
            print_table(pl.DataFrame(backtest_rows(answer.backtest), schema=BACKTEST_HEADER, orient="row"))
        for line in score_sentences(answer.backtest):
            print(line)
    return 0
