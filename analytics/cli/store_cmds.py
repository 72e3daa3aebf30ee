"""``tidelens sources``, ``tidelens series`` and ``tidelens audit``: what the store holds, and who
changed it from the app."""

from __future__ import annotations

import argparse

from analytics.audit import audit_dicts, audit_rows
from analytics.cli.commands import command_help
from analytics.cli.common import add_db, add_json, open_to_read, print_json, print_table
from analytics.resultcache import CACHE_MB_ENV, usage


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sources", help=command_help("sources"))
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_sources)

    p = sub.add_parser("series", help=command_help("series"))
    add_db(p)
    add_json(p)
    p.add_argument("--metric", default=None, help="only series of this metric name")
    p.set_defaults(func=cmd_series)

    p = sub.add_parser("audit", help=command_help("audit"))
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_audit)


def cmd_sources(args: argparse.Namespace) -> int:
    with open_to_read(args) as st:
        frame = st.sources()
    if args.json:
        print_json(frame.to_dicts())
    else:
        print_table(frame.drop("content_hash"))
        used = usage()
        print("result cache: off" if used.folder is None else
              f"result cache (timelines, events, rhythm, calibrations of every store; the app's too): "
              f"{used.folder}, {used.files} files, {used.bytes / 2**20:,.1f} MiB of "
              f"{used.limit_bytes / 2**20:,.0f} MiB (${CACHE_MB_ENV})")
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    with open_to_read(args) as st:
        frame = st.series(args.metric)
    if args.json:
        print_json(frame.to_dicts())
    else:
        print_table(frame.drop("labels"))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    with open_to_read(args) as st:
        if args.json:
            print_json(audit_dicts(st, limit=1_000_000))
            return 0
        frame = audit_rows(st, limit=1_000_000)
    if frame.height == 0:
        print(f"{st.path}: no change recorded (loads, pulls and map changes made from the app are)")
        return 0
    print_table(frame, max_rows=frame.height)
    return 0
