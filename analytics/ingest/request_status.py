"""What a request log's success, error and status columns say: the words and codes read as a
failed request (SUCCEED/FAILED, true/false, 5xx and 429), one reading for every reader.
"""

from __future__ import annotations

from typing import Any, Callable

import polars as pl

_TRUE = ("true", "1", "yes", "y", "t")
SUCCESS_WORDS = frozenset({"succeed", "succeeded", "success", "successful", "ok", "true", "1", "yes", "y", "t",
                           "pass", "passed", "done", "complete", "completed", "finished"})
FAILURE_WORDS = frozenset({"fail", "failed", "failure", "error", "err", "false", "0", "no", "n", "f", "timeout",
                           "timed_out", "aborted", "cancelled", "canceled", "rejected", "exception"})
# failure words that also mean "no error" in an error column (error = 0 / false is a success)
_FALSY = frozenset({"false", "0", "no", "n", "f"})

def success_failed(value: str, success_values: tuple[str, ...] | None = None) -> bool | None:
    """Whether a success column's ``value`` says the request failed (None: it says neither).

    >>> [success_failed(v) for v in ("SUCCEED", "FAILED", "ok", "0", "200", "503", "PENDING")]
    [False, True, False, True, False, True, None]
    >>> success_failed("SUCCEED", ("succeed",)), success_failed("DONE", ("succeed",))
    (False, True)
    """
    w = value.strip().lower()
    if success_values is not None:
        return w not in {v.strip().lower() for v in success_values}
    if w in SUCCESS_WORDS:
        return False
    if w in FAILURE_WORDS:
        return True
    if len(w) == 3 and w.isdigit() and w[0] in "12345":
        return is_error_status(w)
    return None


def error_flag(value: str) -> bool:
    """Whether an error column's ``value`` says the request failed (true, 1, or a failure word)."""
    w = value.strip().lower()
    return w in _TRUE or (w in FAILURE_WORDS and w not in _FALSY)


def status_error(value: str) -> bool:
    """Whether a status column's ``value`` is an error: 5xx, 429, or a failure word (FAILED, ERROR)."""
    w = value.strip().lower()
    return is_error_status(w) or (w in FAILURE_WORDS and w not in _FALSY)


def is_error_status(v: str) -> bool:
    v = v.strip()
    return v.isdigit() and (int(v) >= 500 or int(v) == 429)


def by_value(s: pl.Series, fn: Callable[[str], Any], dtype: Any = pl.Boolean) -> pl.Series:
    """``fn`` of each distinct value of ``s`` (a log repeats few), mapped back onto every row; a
    null stays null for text and is False for a flag."""
    if s.dtype == pl.Boolean:
        s = s.cast(pl.Utf8).str.to_lowercase()
    elif s.dtype not in (pl.Utf8, pl.Categorical):
        s = s.cast(pl.Utf8)
    values = s.unique().drop_nulls().cast(pl.Utf8).to_list()
    out = s.replace_strict({v: fn(v) for v in values}, default=None, return_dtype=dtype)
    return out.fill_null(False) if dtype == pl.Boolean else out
