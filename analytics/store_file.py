"""Opening a store file as data, never as code: the one place Tidelens connects to DuckDB.

A DuckDB file is more than tables: views, macros and types are SQL that runs when a query names
them, so a store whose ``sources`` is a view over ``read_text('/proc/self/environ')`` would print
the server's environment through ``tidelens sources`` and the Data page. Every connection to a
store (the CLI's, the app's, a load's: :class:`analytics.store.Store` is the only caller) is made
by :func:`connect_store`, which

1. refuses, before DuckDB reads a byte, a path that is not a regular file (a named pipe would hang
   the open, a device never ends), an empty file and a file without DuckDB's header (``DUCK`` at
   byte 8); a ``.wal`` beside the store that is not a regular file is refused too (DuckDB replays
   it on open);
2. connects with external access off and the configuration locked (:data:`DATA_ONLY_CONFIG`): no
   query on the connection, whatever the store holds, can read or write a file, list a folder,
   attach a database, load an extension or fetch a URL;
3. refuses the store unless its catalog holds only what Tidelens writes (:data:`STORE_DDL`), each
   table exactly as Tidelens declares it: no view, macro, type, index or schema, and no table of
   another name or shape. A store from before a table existed (no ``requests``, no ``slos``) is
   fine: a missing table is not a foreign one.

A path that does not exist is created by a writer, as before; a reader is told there is no store.
The catalog check of a file is remembered while the file (and its ``.wal``) keep their size and
modification time, so the app's many short reads of one store pay for it once.

>>> con = connect_store(":memory:", read_only=False)
>>> con.execute("SELECT current_setting('enable_external_access')").fetchall()
[(False,)]
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path  # noqa: F401 - the doctests' paths
from typing import Any

import duckdb

from analytics.config import LOCK_WAIT_ENV, env_setting
from analytics.errors import StoreBusyError, StoreFileError
from analytics.sql import audit as audit_q
from analytics.sql import changes as changes_q
from analytics.sql import live as live_q
from analytics.sql import store as q
from analytics.text import visible

# What Tidelens writes into a store: the catalog a store may hold (a subset of it).
STORE_DDL = (q.SCHEMA, live_q.LIVE_STATE_CREATE, audit_q.AUDIT_CREATE, changes_q.CHANGES_CREATE)

# Checked with the pinned duckdb 2.0.1: every key below exists and is accepted by
# ``duckdb.connect(config=...)``. With them, read_text/read_csv/glob of any path (``/etc/passwd``,
# ``/proc/self/environ``), an http URL, ATTACH, COPY TO, INSTALL and LOAD all raise
# PermissionException; ``SET enable_external_access = true`` (or any SET, memory_limit included)
# raises "the configuration has been locked". Replacement scans of Python variables are off
# too, but ``con.register`` (how the store stages a load's frames) still works, so loads need no
# file access of DuckDB's own: the sample's chunked load streams its spilled Parquet through
# Arrow (analytics.sample.export). DuckDB's spill folder (``<store>.tmp``) is its own and stays
# usable. The extension settings are already off by default except autoload; they are written out
# so that a future default cannot turn them on.
DATA_ONLY_CONFIG: dict[str, Any] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,
}
DUCKDB_MAGIC = b"DUCK"
MAGIC_OFFSET = 8  # DuckDB's main header: an 8-byte checksum, then the magic bytes

# A store's file lock is held by one writer (or by readers) at a time, across processes. Opening
# waits this long for it, polling, then says who holds it; a load that takes minutes is reported,
# not waited out.
DEFAULT_LOCK_WAIT_S = 10.0
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in .*\(PID (\d+)\)")

_WROTE = "open only stores Tidelens wrote (`tidelens ingest --db PATH FILES` builds one)"
_KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket"}
_CHECKED: OrderedDict[tuple[Any, ...], None] = OrderedDict()  # files whose catalog passed, by identity
_CHECKED_MAX = 256
_CHECKED_LOCK = threading.Lock()


def lock_wait_s() -> float:
    """Seconds to wait for another program's lock on a store: ``$TIDELENS_LOCK_WAIT_S`` or 10."""
    raw = env_setting(LOCK_WAIT_ENV)
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_LOCK_WAIT_S
    except ValueError:
        return DEFAULT_LOCK_WAIT_S


def _shown(name: object, limit: int = 80) -> str:
    """A catalog name for a message: controls escaped, bounded, quoted."""

    text = visible(name, keep="")
    return "'" + (text if len(text) <= limit else text[:limit] + "...") + "'"


def check_file(path: str) -> bool:
    """Whether ``path`` exists; raise :class:`StoreFileError` when it is there but is no DuckDB file.

    Decided from ``os.stat`` and the first 12 bytes, read without blocking, so a named pipe or a
    device is refused at once and DuckDB never parses a file that is not its own.

    >>> import tempfile
    >>> empty = Path(tempfile.mkdtemp()) / "e.duckdb"
    >>> check_file(str(empty))
    False
    >>> empty.touch(); check_file(str(empty))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    analytics.errors.StoreFileError: ...e.duckdb: the file is empty, not a DuckDB store; ...
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:  # permission, a name too long, a symlink loop
        raise StoreFileError(path, f"cannot be read ({exc.strerror}); {_WROTE}") from None
    _regular_or_refuse(path, st.st_mode, "the store")
    wal = path + ".wal"
    try:
        _regular_or_refuse(path, os.stat(wal).st_mode, f"its write-ahead log {wal}")
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreFileError(path, f"its write-ahead log {wal} cannot be read ({exc.strerror})") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise StoreFileError(path, f"cannot be read ({exc.strerror}); {_WROTE}") from None
    try:
        _regular_or_refuse(path, os.fstat(fd).st_mode, "the store")  # swapped since the stat
        head = os.pread(fd, MAGIC_OFFSET + len(DUCKDB_MAGIC), 0)
    finally:
        os.close(fd)
    if not head:
        raise StoreFileError(path, "the file is empty, not a DuckDB store; remove it (a load creates a "
                             f"store where none exists), or {_WROTE}")
    if head[MAGIC_OFFSET:] != DUCKDB_MAGIC:
        raise StoreFileError(path, f"not a DuckDB file (no DuckDB header at its start); {_WROTE}")
    return True


def _regular_or_refuse(path: str, mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise StoreFileError(path, f"{what} is {kind}, not a DuckDB store file; {_WROTE}")


def _connect(path: str, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """Connect, waiting a bounded time while another process holds the file's lock."""
    wait_s = lock_wait_s()
    start = time.monotonic()
    delay = 0.05
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=config)
        except duckdb.IOException as exc:
            holder = _LOCK_HOLDER.search(str(exc))
            if holder is None and "Could not set lock" not in str(exc):
                raise _unopenable(path, exc) from None
            waited = time.monotonic() - start
            if waited >= wait_s:
                raise StoreBusyError(path, int(holder.group(1)) if holder else None,
                                     writing=not read_only, waited_s=round(waited, 1)) from None
            time.sleep(min(delay, max(wait_s - waited, 0.0)))
            delay = min(delay * 2, 1.0)
        except duckdb.Error as exc:  # a damaged file, a newer storage version
            raise _unopenable(path, exc) from None


def _unopenable(path: str, exc: Exception) -> StoreFileError:
    first = visible(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, keep="")
    return StoreFileError(path, f"DuckDB cannot open it ({first[:300]}); {_WROTE}")


@lru_cache(maxsize=1)
def expected_catalog() -> dict[tuple[str, str], str | None]:
    """``(kind, name) -> definition`` of every object Tidelens writes, as this DuckDB renders it.

    Built from :data:`STORE_DDL` in a scratch in-memory database, so the check follows the schema
    constants by construction.
    """
    con = duckdb.connect(":memory:", config=DATA_ONLY_CONFIG)
    try:
        for ddl in STORE_DDL:
            con.execute(ddl)
        return {(kind, name): sql for kind, _schema, name, sql in con.execute(q.CATALOG_OBJECTS).fetchall()}
    finally:
        con.close()


def check_catalog(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Raise :class:`StoreFileError` unless ``con``'s store holds only objects Tidelens writes.

    Reads the catalog alone (never a table, view or macro of the store).
    """
    expected = expected_catalog()
    foreign: list[str] = []
    for kind, schema, name, sql in con.execute(q.CATALOG_OBJECTS).fetchall():
        if schema != "main" and kind != "schema":
            foreign.append(f"a {kind} named {_shown(name)} in schema {_shown(schema)}")
        elif (kind, name) not in expected:
            foreign.append(f"a {kind} named {_shown(name)}")
        elif kind != "sequence" and sql != expected[(kind, name)]:
            foreign.append(_table_difference(con, name) if kind == "table" else
                           f"a {kind} named {_shown(name)} unlike Tidelens' own")
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more objects" if len(foreign) > 3 else "")
        raise StoreFileError(path, f"not a Tidelens store: it holds {shown}; {_WROTE}. Views, macros "
                             "and other objects in a store run as code when it is read, so it is "
                             "refused before anything is read")


def _table_difference(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """How the store's ``table`` differs from Tidelens' table of that name, in words."""
    scratch = duckdb.connect(":memory:", config=DATA_ONLY_CONFIG)
    try:
        for ddl in STORE_DDL:
            scratch.execute(ddl)
        want = {c[0]: c[1:] for c in scratch.execute(q.TABLE_COLUMNS, {"table": table}).fetchall()}
    finally:
        scratch.close()
    have = {c[0]: c[1:] for c in con.execute(q.TABLE_COLUMNS, {"table": table}).fetchall()}
    what = f"a table named {_shown(table)} unlike Tidelens' own"
    extra = [c for c in have if c not in want]
    missing = [c for c in want if c not in have]
    changed = [c for c in have if c in want and have[c] != want[c]]
    if extra:
        return f"{what} (column {_shown(extra[0])} is not one Tidelens writes)"
    if missing:
        return f"{what} (column {_shown(missing[0])} is missing)"
    if changed:
        c = changed[0]
        if have[c][0] != want[c][0]:
            return f"{what} (column {_shown(c)} is {have[c][0]}, not {want[c][0]})"
        return f"{what} (column {_shown(c)} has another default or nullability)"
    return f"{what} (its constraints, defaults or column order differ)"


def _identity(path: str) -> tuple[Any, ...] | None:
    """What changes whenever the store file or its ``.wal`` does (None: cannot tell)."""
    try:
        st = os.stat(path)
        try:
            wal = os.stat(path + ".wal")
            wal_part: tuple[int, ...] = (wal.st_size, wal.st_mtime_ns, wal.st_ino)
        except FileNotFoundError:
            wal_part = ()
        return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, *wal_part)
    except OSError:
        return None


def connect_store(path: str, *, read_only: bool, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the store at ``path`` that can read data and nothing else.

    Parameters
    ----------
    path:
        The DuckDB file (a missing one is created unless ``read_only``), or ``":memory:"``.
    read_only:
        Open without write access (several readers may share a file).
    memory_limit:
        DuckDB's memory limit for the connection (e.g. ``"4GB"``; it spills beyond it). Set here
        or not at all: the configuration is locked once connected.

    Raises
    ------
    StoreFileError
        The file is no DuckDB store, or holds objects Tidelens never writes.
    StoreBusyError
        Another program held the file's lock past :func:`lock_wait_s`.
    """
    config = dict(DATA_ONLY_CONFIG)
    if memory_limit is not None:
        config["memory_limit"] = memory_limit
    if path == ":memory:":
        return _connect(path, read_only, config)
    if not check_file(path) and read_only:
        raise StoreFileError(path, "no such store; build one with `tidelens ingest --db PATH FILES` "
                             "(or `tidelens sample`)")
    con = _connect(path, read_only, config)
    try:
        key = _identity(path)
        with _CHECKED_LOCK:
            known = key is not None and key in _CHECKED
        if not known:
            check_catalog(con, path)
            if key is not None:
                with _CHECKED_LOCK:
                    _CHECKED[key] = None
                    while len(_CHECKED) > _CHECKED_MAX:
                        _CHECKED.popitem(last=False)
    except BaseException:
        con.close()
        raise
    return con
