"""Exceptions Tidelens raises on bad input: each names the file, the place and what to do.

Every user-facing failure is one of these, so the CLI and the pages can print one line
per failing file instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path

from analytics.text import visible

# An error message is read by a person in a terminal or a page: a reader that echoed every column
# of a 3-million-column header wrote 8.9 MB into one. Longer messages keep their start and say how
# much was cut.
MESSAGE_MAX_CHARS = 2000


def bounded(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    r"""``text`` with control characters shown as escapes (a newline too: no forged line in a
    terminal) and at most ``limit`` characters, the cut said.

    >>> bounded("a\x1b[31mb\nc"), bounded("x" * 40, 30)
    ('a\\u001b[31mb\\nc', 'xxxxxx… (+34 chars)')
    """

    s = visible(text).replace("\n", "\\n")
    if len(s) <= limit:
        return s
    keep = max(1, limit - 24)  # room for the note of what was cut
    return s[:keep] + f"… (+{len(s) - keep:,} chars)"


class TidelensError(Exception):
    """Base class of every error Tidelens reports to a user."""


class IngestError(TidelensError):
    """A source could not be loaded.

    Parameters
    ----------
    source:
        The file name (or URL) that failed.
    message:
        What was wrong and what to do about it.
    line:
        1-based line number in the (decompressed) text, where the format has lines.
    where:
        Another locator when there are no lines, e.g. a JSON path ``data.result[3].values[7]``.

    Examples
    --------
    >>> str(IngestError("scrape.prom", "bad sample value 'abc'", line=12))
    "scrape.prom:12: bad sample value 'abc'"
    """

    def __init__(self, source: str | Path, message: str, *, line: int | None = None,
                 where: str | None = None) -> None:
        self.source = bounded(str(source), 500)
        self.message = bounded(message)
        self.line = line
        self.where = where
        loc = self.source
        if line is not None:
            loc += f":{line}"
        if where:
            loc += f" at {where}"
        super().__init__(f"{loc}: {self.message}")


class ConfigError(TidelensError):
    """A configuration file (``tidelens.toml``, a column mapping) or a setting is invalid."""

    def __init__(self, message: str) -> None:
        super().__init__(bounded(message))


class NotEnoughDataError(TidelensError):
    """The store holds too little of what an analysis needs; the message says what is missing."""


class StoreBusyError(TidelensError):
    """Another program holds the store's file lock (a load writing it, or readers while one writes).

    Parameters
    ----------
    path:
        The store file.
    pid:
        The process DuckDB names as the lock's holder, when it does.
    writing:
        Whether this program wanted to write (then the holder may be a reader too).
    waited_s:
        How long this program waited for the lock before giving up.
    """

    def __init__(self, path: str | Path, pid: int | None, *, writing: bool, waited_s: float) -> None:
        self.path = str(path)
        self.pid = pid
        holder = f" (pid {pid})" if pid is not None else ""
        if writing:
            what = f"another program{holder} has this store open (a load writing it, or a reader)"
        else:
            what = f"another load is writing this store{holder}"
        super().__init__(f"{self.path}: {what}; waited {waited_s:g} s. Try again when it "
                         "finishes, or raise TIDELENS_LOCK_WAIT_S to wait longer")


class StoreFileError(TidelensError):
    """A file that Tidelens will not open as a store: not a regular file (a named pipe, a device, a
    folder), empty, not a DuckDB file, or a DuckDB file holding objects Tidelens never writes
    (views, macros, tables of other shapes), which could run code when read.

    Parameters
    ----------
    path:
        The file.
    reason:
        Why, and what to do.

    Examples
    --------
    >>> str(StoreFileError("t.duckdb", "the file is empty; remove it, or name a store Tidelens wrote"))
    't.duckdb: the file is empty; remove it, or name a store Tidelens wrote'
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class AccessDenied(TidelensError):
    """A visitor of a shared server asked for something their role does not allow (a load, a
    pull, a change of the workload map), or a pull to a server or with a secret the operator did
    not list. Raised by the library before anything is written or sent, whatever the page drew.

    Parameters
    ----------
    who:
        The visitor as the audit record names them.
    message:
        What was refused and what to do (whom to ask, which setting).

    Examples
    --------
    >>> str(AccessDenied("ann@example.com", "loading data needs the editor role"))
    'ann@example.com: loading data needs the editor role'
    """

    def __init__(self, who: str, message: str) -> None:
        self.who = bounded(who, 200)
        super().__init__(f"{self.who}: {bounded(message)}")
