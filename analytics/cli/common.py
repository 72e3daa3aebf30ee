"""Pieces every CLI command shares: the ``--db`` option and table/JSON printing."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
import polars as pl

from analytics.store import DEFAULT_DB


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB),
                        help=f"DuckDB store file (default {DEFAULT_DB}); ':memory:' for none")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def print_json(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                                  default=str).decode() + "\n")


def print_table(frame: pl.DataFrame, *, max_rows: int = 200) -> None:
    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                   tbl_hide_dataframe_shape=True):
        print(frame)
