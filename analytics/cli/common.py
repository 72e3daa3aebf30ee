"""Pieces every CLI command shares: ``--db``, ``--config`` and table/JSON printing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from analytics.cli import write_json
from analytics.config import CONFIG_ENV, CONFIG_NAME, find_config
from analytics.errors import ConfigError
from analytics.slo import parse_slo_ms
from analytics.store import DEFAULT_DB
from analytics.text import visible_frame


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB),
                        help=f"DuckDB store file (default {DEFAULT_DB}); ':memory:' for none")


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
    """``frame`` as a table; a cell's control characters (and newlines) shown as escapes."""

    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                   tbl_hide_dataframe_shape=True):
        print(visible_frame(frame, keep=""))
