"""``tidelens ingest``: load export files (any supported format, gzip or not) into the store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analytics.access import command_line_identity
from analytics.cli.commands import command_help
from analytics.cli.common import add_db, add_json, print_json
from analytics.cli.progress import Progress
from analytics.ingest import group_failures, ingest_path, missing_path
from analytics.ingest.mapping import load_mapping
from analytics.store import Store
from analytics.text import visible
from analytics.times import parse_time_ms
from analytics.writes import recorded

GROUP_AT = 3  # files sharing one reason before it is said once for them all


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help=command_help("ingest"))
    add_db(p, writes=True)
    add_json(p)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (recursed)")
    p.add_argument("--at", default=None, metavar="TIME",
                   help="time for samples without timestamps (ISO-8601 or epoch s); default: the file's mtime")
    p.add_argument("--columns", default=None, metavar="MAPPING.toml",
                   help="read every CSV/Parquet through this column mapping (time, values, metric, labels, "
                        "signals; see README 'Your own table')")
    p.set_defaults(func=cmd_ingest)


def cmd_ingest(args: argparse.Namespace) -> int:
    at_ms = parse_time_ms(args.at, what="--at") if args.at else None
    columns = None
    if args.columns:

        columns = load_mapping(args.columns)  # refused before the store is opened
    # A path that is not there is said before the store is opened: a command that loads nothing
    # leaves no store file behind (it created an empty one, which the app then offered to open).
    there = [p for p in args.paths if Path(p).exists()]
    found: dict[str, list] = {p: [missing_path(p)] for p in args.paths if p not in there}
    if there:
        with Progress("ingest", args) as stage, Store(args.db) as st, \
                recorded(st, command_line_identity(), "load", ", ".join(map(str, args.paths))[:500]):
            for path in there:
                stage(f"loading {path}")
                found[path] = ingest_path(st, path, at_ms=at_ms, columns=columns)
    results = [r for p in dict.fromkeys(args.paths) for r in found[p]]
    loaded = [r for r in results if r.status == "loaded"]
    failed = [r for r in results if r.status == "failed"]
    requests = sum(int(r.extra.get("requests", 0)) for r in loaded)
    if args.json:
        print_json({"sources": [r.as_dict() for r in results],
                    "series": sum(r.series for r in loaded), "samples": sum(r.samples for r in loaded),
                    "requests": requests})
    else:
        for r in results:
            line = f"{r.status:8} {r.format:15} {r.series:>8} series {r.samples:>10} samples  {visible(r.name, keep='')}"
            if r.duplicates:
                line += f"  ({r.duplicates} duplicate timestamps, last kept)"
            if r.blanks:
                line += f"  ({r.blanks} DCGM blanks dropped)"
            if r.note and r.status != "failed":
                line += f"  [{r.note}]"
            print(line)
        print(f"{len(loaded)} loaded, {len(results) - len(loaded) - len(failed)} skipped, {len(failed)} failed: "
              f"{sum(r.series for r in loaded)} series, {sum(r.samples for r in loaded)} samples"
              + (f", {requests:,} requests" if requests else ""))
    # A failure: one line, its file and its line or JSON path. A reason that GROUP_AT or more
    # files share: said once, with their files (never 29 lines and then the same summary).
    groups = group_failures(failed)
    shared = {name for _, names in groups if len(names) >= GROUP_AT for name in names}
    for r in failed:
        if r.name not in shared:
            print(f"tidelens: {r.error}", file=sys.stderr)
    many = [(reason, names) for reason, names in groups if len(names) >= GROUP_AT]
    if many:
        print(f"tidelens: {len(shared)} failed for {len(many)} shared reason(s):", file=sys.stderr)
        for reason, names in many:
            shown = ", ".join(visible(n, keep="") for n in names[:3]) + (
                f" and {len(names) - 3} more" if len(names) > 3 else "")
            print(f"  {len(names)} x {reason}\n      {shown}", file=sys.stderr)
    return 1 if failed else 0
