"""``tidelens sample``: simulate a scenario and write its exports, load it, or write the excerpts.

``--variant NAME`` (repeatable) exports the same story the way another real cluster would
(:mod:`analytics.sample.variants`); ``--variant list`` says what each imitates."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from analytics.cli.commands import command_help
from analytics.cli.common import print_json
from analytics.errors import ConfigError
from analytics.fieldhelp import fields_help
from analytics.sample import FORMATS, SCENARIOS, load_into, simulate, write_exports
from analytics.sample.cluster import POOL_CHANGE_POLICIES, PoolChange
from analytics.sample.export import write_excerpts
from analytics.sample.variants import VARIANTS, describe, parse_variants
from analytics.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help=command_help("sample"),
                       epilog=_variant_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None, help="folder to write the exports and truth.json into")
    p.add_argument("--scenario", default="morning", choices=sorted(SCENARIOS), help="the story to simulate")
    p.add_argument("--days", type=int, default=21, help="days to simulate (21+ shows a weekly rhythm)")
    p.add_argument("--gpus", type=int, default=64, help="GPUs in the pool (a multiple of 8, at least 16)")
    p.add_argument("--seed", type=int, default=7, help="random seed; the same seed gives the same bytes")
    p.add_argument("--formats", default="prom-json,prom-text",
                   help=f"comma-separated formats to write: {', '.join(FORMATS)}")
    p.add_argument("--db", default=None, help="also load the run into this DuckDB store")
    p.add_argument("--excerpts", type=Path, default=None,
                   help="write the small bundled excerpts of the default sample into this folder (e.g. data/sample)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME",
                   help=f"export the run as another real cluster would (repeatable; 'list' describes them): "
                        f"{', '.join(VARIANTS)}")

    change_help = fields_help(PoolChange)
    p.add_argument("--change-day", type=int, default=None, metavar="DAY",
                   help="the pool runs shared, then changes policy on this day: " + change_help["day"])
    p.add_argument("--change-policy", choices=POOL_CHANGE_POLICIES, default="partitioned",
                   help=change_help["policy"] + " (default partitioned; the truth says the minutes before and after)")
    p.add_argument("--change-reserved-gpus", type=int, default=PoolChange.reserved_gpus,
                   help=change_help["reserved_gpus"] + f" (default {PoolChange.reserved_gpus})")
    p.add_argument("--change-weekly-surges", action="store_true", help=change_help["weekly_surges"])
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=cmd_sample)


def _variant_table() -> str:
    """``--help``'s epilog: every variant with the real-cluster fact it imitates."""

    width = max(len(n) for n in VARIANTS)
    rows = "\n".join(f"  {v.name:<{width}}  {v.help}" for v in VARIANTS.values())
    return f"variants (--variant NAME, repeatable):\n{rows}"


def cmd_sample(args: argparse.Namespace) -> int:
    if "list" in args.variant:
        if args.json:
            print_json(describe())
        else:
            print(_variant_table())
        return 0
    variants = parse_variants(args.variant)  # before any work: a bad name costs nothing
    if args.excerpts is not None and variants:
        raise ConfigError("--excerpts writes the bundled excerpts of the default sample: drop --variant, "
                          "or use --out DIR for a variant's exports")
    if args.out is None and args.db is None and args.excerpts is None:
        raise ConfigError("tidelens sample: give --out DIR, --db PATH or --excerpts DIR")
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ConfigError(f"--formats: unknown {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    t0 = time.perf_counter()
    if args.excerpts is not None:
        result = simulate("morning", days=21, gpus=64, seed=7)
    else:

        change = None if args.change_day is None else PoolChange(
            day=args.change_day, policy=args.change_policy, reserved_gpus=args.change_reserved_gpus,
            weekly_surges=args.change_weekly_surges)
        result = simulate(args.scenario, days=args.days, gpus=args.gpus, seed=args.seed, variants=variants,
                          change=change)
    summary: dict = {"scenario": result.scenario.name, "days": result.days, "gpus": result.gpus,
                     "seed": result.seed, "variants": list(result.variants), "events": len(result.events),
                     "simulate_s": round(time.perf_counter() - t0, 2)}
    written = []
    if args.excerpts is not None:
        written += write_excerpts(result, args.excerpts)
    if args.out is not None:
        written += write_exports(result, args.out, formats=formats)
    if args.db is not None:
        with Store(args.db) as st:
            summary["load"] = load_into(st, result).as_dict()
    summary["files"] = [str(p) for p in written]
    summary["total_s"] = round(time.perf_counter() - t0, 2)
    if args.json:
        print_json(summary)
    else:
        tag = f" ({', '.join(result.variants)})" if result.variants else ""
        print(f"{summary['scenario']}{tag}: {summary['days']} days, {summary['gpus']} GPUs, seed {summary['seed']}, "
              f"{summary['events']} tail events, {len(written)} files, {summary['total_s']} s")
        for p in written:
            print(f"  {p}")
    return 0
