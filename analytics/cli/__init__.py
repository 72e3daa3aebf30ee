"""The ``tidelens`` command line: one sub-module per command group, each with ``register()``.

Every command takes ``--db PATH`` (default ``data/tidelens.duckdb``), prints a readable table
by default and JSON with ``--json``, and exits non-zero on bad input with one line per problem.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from analytics.errors import TidelensError

# Command modules, in the order ``tidelens --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "analytics.cli.store_cmds",
    "analytics.cli.ingest_cmd",
    "analytics.cli.rhythm_cmd",
    "analytics.cli.timeline_cmd",
    "analytics.cli.live_cmd",
    "analytics.cli.whatif_cmd",
    "analytics.cli.sample_cmd",
    "analytics.cli.events_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidelens",
        description="Was it the users, or a batch job holding the GPUs? "
                    "Load GPU telemetry, find tail events, model shared vs partitioned pools.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TidelensError as exc:
        print(f"tidelens: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
