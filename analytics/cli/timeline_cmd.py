"""``tidelens timeline``, ``tidelens signals`` and ``tidelens classify``: the derived timelines,
which signals the store has, and how the workload map classifies its workloads."""

from __future__ import annotations

import argparse

import polars as pl

from analytics.cli.commands import command_help
from analytics.cli.common import add_config, add_db, add_json, config_path, open_to_read, print_json, print_table
from analytics.fieldhelp import field_help
from analytics.timeline import (TimelineConfig, autoscaler_links, class_rules, parse_step_s, pool_timeline,
                                service_timeline, shared_gpu_keys, signal_report)
from analytics.workloads import classify_workloads, load_map

def _add_map(p: argparse.ArgumentParser) -> None:
    add_config(p, "the workload map")


def _map(args: argparse.Namespace):
    return load_map(config_path(args))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("timeline", help=command_help("timeline"))
    add_db(p)
    add_json(p)
    _add_map(p)
    p.add_argument("--kind", choices=("pool", "service"), default="pool", help="which timeline (default pool)")
    p.add_argument("--step", default="1m",
                   help=field_help(TimelineConfig, "step_s") + " (e.g. 30s, 1m, 5m; default 1m)")
    p.add_argument("--csv", default=None, metavar="OUT", help="write the whole timeline to this CSV file")
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser("signals", help=command_help("signals"))
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_signals)

    p = sub.add_parser("classify", help=command_help("classify"))
    add_db(p)
    add_json(p)
    _add_map(p)
    p.set_defaults(func=cmd_classify)


def _iso(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"))


def cmd_timeline(args: argparse.Namespace) -> int:
    cfg = TimelineConfig(step_s=parse_step_s(args.step))
    wmap = _map(args)
    with open_to_read(args) as st:
        frame = pool_timeline(st, cfg, wmap) if args.kind == "pool" else service_timeline(st, cfg, wmap)
    frame = _iso(frame)
    if args.csv:
        frame.write_csv(args.csv)
        print(f"wrote {frame.height} rows to {args.csv}")
    elif args.json:
        print_json(frame.to_dicts())
    else:
        print_table(frame)
    return 0


def cmd_signals(args: argparse.Namespace) -> int:
    with open_to_read(args) as st:
        frame = signal_report(st)
        rules = class_rules(st)
        shared = shared_gpu_keys(st)
    if args.json:
        print_json({"signals": frame.to_dicts(), "unlabelled_gpus": rules.to_dicts(),
                    "shared_gpu_keys": shared.to_dicts()})
    else:
        print_table(frame)
        _section("How each exporter's GPUs without a pod label are counted (gpus: all its GPUs; "
                 "unlabelled_gpus: those seen without one)", rules)
        if shared.height:
            _section("GPU keys many pods share at once (likely each pod its own GPU)", shared)
    return 0


def _section(title: str, frame: pl.DataFrame) -> None:
    print(f"\n{title}:")
    if frame.height:
        print_table(frame)
    else:
        print("  (none in this store)")


def cmd_classify(args: argparse.Namespace) -> int:
    wmap = _map(args)
    with open_to_read(args) as st:
        frame = classify_workloads(st, wmap)
        links = autoscaler_links(st, wmap)
        rules = class_rules(st)
    if args.json:
        print_json({"workloads": frame.to_dicts(), "autoscalers": links.to_dicts(),
                    "unlabelled_gpus": rules.to_dicts()})
    else:
        print_table(frame)
        _section("Autoscalers: the service each HPA and Deployment was linked to, and the rule", links)
        _section("How each exporter's GPUs without a pod label are counted (gpus: all its GPUs; "
                 "unlabelled_gpus: those seen without one)", rules)
    return 0
