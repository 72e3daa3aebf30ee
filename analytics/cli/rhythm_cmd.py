"""``tidelens rhythm``: daily and weekly rhythm of traffic and batch, per signal."""

from __future__ import annotations

import argparse

import polars as pl

from analytics.cli.commands import command_help
from analytics.cli.common import add_db, add_json, open_to_read, print_json, print_table
from analytics.rhythm.config import RhythmConfig, config_help
from analytics.rhythm.digest import rhythm_report
from analytics.timeline.config import parse_step_s


def register(sub: argparse._SubParsersAction) -> None:
    helps = config_help()
    p = sub.add_parser("rhythm", help=command_help("rhythm"))
    add_db(p)
    add_json(p)
    p.add_argument("--signal", action="append", default=None, metavar="NAME",
                   help="signal to analyse (repeatable), e.g. rps:chat-vllm, gpus_batch:default, "
                        "metric:request_rate; default every traffic and batch signal")
    p.add_argument("--step", default="1m", help="timeline step, e.g. 1m or 5m (default 1m)")
    p.add_argument("--tz", default="UTC", help=helps["timezone"])
    p.add_argument("--resolution", default="10m", help=helps["resolution_s"] + " (written 5m, 10m, 1h)")
    p.add_argument("--tidal-share", type=float, default=RhythmConfig.tidal_share, help=helps["tidal_share"])
    p.add_argument("--band", default="0.05,0.95", help="norm band residual quantiles, LOW,HIGH")
    p.set_defaults(func=cmd_rhythm)


def cmd_rhythm(args: argparse.Namespace) -> int:
    low, _, high = args.band.partition(",")
    cfg = RhythmConfig(resolution_s=parse_step_s(args.resolution), timezone=args.tz,
                       tidal_share=args.tidal_share, band_low_q=float(low), band_high_q=float(high or 0.95))
    with open_to_read(args) as st:
        results = rhythm_report(st, cfg, signals=args.signal, step_s=parse_step_s(args.step))
    rows = [r.as_dict() for r in results]
    if args.json:
        print_json(rows)
        return 0
    table = pl.DataFrame([{
        "signal": r["signal"], "peak_hour": r.get("peak_hour"), "trough_hour": r.get("trough_hour"),
        "trough_to_peak": r.get("trough_to_peak"),
        "tidal_window": (f"{r['tidal_window']['start_hour']:02d}-{r['tidal_window']['end_hour']:02d}"
                         if r.get("tidal_window") else None),
        "timezone": r.get("timezone"), "periods": ",".join(r.get("periods_used") or []),
        "error": r.get("note") or r.get("error")} for r in rows])
    print_table(table)
    for r in rows:
        for note in r.get("notes") or []:
            print(f"{r['signal']}: {note}")
        if r.get("hour_of_day"):  # a range too short for a rhythm: the hours it has
            hours = ", ".join(f"{h['hour']:02d}h {h['mean']:.4g}" for h in r["hour_of_day"]
                              if h["mean"] is not None)
            print(f"{r['signal']}: {r['note']} ({r['error']}); hour of day: {hours}")
    return 0
