"""Pieces every CLI command shares: ``--db`` (and the store it opens), ``--config`` and
table/JSON printing.

A command that reads a store and is given no ``--db`` opens what the app opens:
``data/tidelens.duckdb`` when it is there, else the bundled sample (said on standard error), so
``tidelens events`` at a fresh checkout answers as the app's first page does. A command that
writes (``ingest``, ``pull``, ``collect``, ``change add``) writes ``data/tidelens.duckdb``, never
the sample's cached file. A ``--db`` that names no file is refused before any work, and no empty
store file is left behind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from analytics.cli import write_json
from analytics.cli.progress import Progress
from analytics.config import CONFIG_ENV, CONFIG_NAME, find_config
from analytics.errors import ConfigError
from analytics.sample import default_store_path, ensure_default_store
from analytics.slo import parse_slo_ms
from analytics.store import DEFAULT_DB, Store
from analytics.text import visible_frame
from analytics.units import column_text

MEMORY = ":memory:"


def add_db(parser: argparse.ArgumentParser, *, writes: bool = False) -> None:
    """``--db``; a command that only reads defaults to what the app opens (:func:`store_to_read`)."""
    if writes:
        parser.add_argument("--db", default=str(DEFAULT_DB),
                            help=f"DuckDB store file to write (default {DEFAULT_DB}); ':memory:' for none")
    else:
        parser.add_argument("--db", default=None,
                            help=f"DuckDB store file (default {DEFAULT_DB} when it exists, else the bundled "
                                 "sample, as the app opens); ':memory:' for none")


def store_to_read(args: argparse.Namespace, *, hint: str = "") -> str:
    """The store a reading command opens: ``--db``, else ``data/tidelens.duckdb`` when it exists,
    else the bundled sample (built on its first use, as the app's first run builds it).

    Raises ConfigError when ``--db`` names no file (before any work, and without creating one),
    with ``hint`` (what else the command could read) after the way to build one.
    """
    if args.db is None:
        if DEFAULT_DB.exists():
            return str(DEFAULT_DB)
        print(f"tidelens: no --db and no {DEFAULT_DB}: reading the bundled sample, as the app does "
              f"({default_store_path()})", file=sys.stderr)
        with Progress("bundled sample", args) as stage:
            if not default_store_path().exists():
                stage("building it (first run only, about a minute)")
            return str(ensure_default_store())
    if args.db != MEMORY and not Path(args.db).exists():
        raise ConfigError(f"--db {args.db}: no such store; build one with `tidelens ingest --db {args.db} "
                          f"FILES` (or `tidelens sample`){hint or ''}, or leave out --db to read the bundled "
                          "sample")
    return str(args.db)


def open_to_read(args: argparse.Namespace, *, hint: str = "") -> Store:
    """The store :func:`store_to_read` names, opened read-only (``:memory:`` as it is)."""
    path = store_to_read(args, hint=hint)
    return Store(path, read_only=path != MEMORY)


def add_slos(parser: argparse.ArgumentParser, every: str) -> None:
    """``--slo-ms`` (one SLO for every service) and ``--slo SERVICE=MS`` (repeatable, over it):
    the same two flags on every command that judges p99 against an SLO."""
    parser.add_argument("--slo-ms", type=_slo_ms_flag, default=None, metavar="MS", help=every)
    parser.add_argument("--slo", action="append", default=None, metavar="SERVICE=MS",
                        help="one service's p99 SLO in ms, over --slo-ms and tidelens.toml's [slo] "
                             "(repeatable: --slo chat-vllm=1000 --slo image-gen=70000)")


def _slo_ms_flag(text: str) -> float:
    """``--slo-ms`` by the one SLO rule (:func:`analytics.slo.check_slo_ms`), refused by argparse."""
    try:
        return parse_slo_ms(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_config(parser: argparse.ArgumentParser, what: str) -> None:
    """``--config``: the one flag, on every command, for the file the app reads too."""
    parser.add_argument("--config", default=None, metavar="FILE.toml",
                        help=f"tidelens.toml with {what} (default: ${CONFIG_ENV}, else "
                             f"./{CONFIG_NAME} when it exists, else the built-in defaults)")


def config_path(args: argparse.Namespace) -> Path | None:
    """The configuration a command reads: ``--config``, else ``$TIDELENS_CONFIG`` (when that
    file exists, as the app takes it), else ``./tidelens.toml`` when it exists, else None.

    Raises ConfigError when ``--config`` names a file that is not there.
    """
    return find_config(args.config)


def check_zone(tz: str) -> None:
    """``--tz``: an IANA zone, else :class:`ConfigError` naming the flag."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--tz {tz[:80]!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON; control characters in its strings as JSON escapes (the same data)."""
    write_json(obj)


def print_table(frame: pl.DataFrame, *, max_rows: int = 200) -> None:
    """``frame`` as a table: numbers formatted (:func:`analytics.units.column_text`), headers
    never broken, a cell's control characters (and newlines) shown as escapes."""

    numeric = [c for c, t in frame.schema.items() if t.is_numeric()]
    shown = frame.with_columns(pl.Series(c, column_text(frame[c].to_list()), dtype=pl.Utf8) for c in numeric)
    # numbers right-aligned (polars aligns text left), a missing value an empty cell, not "null"
    shown = shown.with_columns(pl.col(pl.Utf8).fill_null("")).with_columns(
        pl.col(c).str.pad_start(int(shown[c].str.len_chars().max() or 0)) for c in numeric)
    # Polars wraps a header (``slo_compliance_mi / nutes``) when the table is wider than its
    # width: the width is the table's own, so a wide table scrolls instead of breaking words.
    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=10_000,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_cell_numeric_alignment="RIGHT"):
        print(visible_frame(shown, keep=""))
