"""Store access for the app: the process-wide readers-writer lock, opening a store file, the
workload map's file, and loading an upload.

Streamlit runs every browser session (and the prefetch, ``pages/_prefetch.py``) in a thread of
the same process, and DuckDB refuses a read-write connection to a file that the process also
has open read-only: readers share one process-wide lock, a writer (an upload) holds it alone.
Stores are opened read-only for reading and closed at once.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from analytics.access import Identity
from analytics.config import config_location
from analytics.data_dir import data_dir
from analytics.errors import TidelensError
from analytics.ingest import not_data_reason
from analytics.store import Store
from analytics.view import ViewSettings, uploads_db_path
from analytics.workloads import load_map
from analytics.writes import load_upload as checked_load

ROOT = Path(__file__).resolve().parent.parent


class StoreLock:
    """Any number of readers at once, or one writer (who may nest reads and writes).

    A waiting writer goes first: new readers wait for it, so a stream of reads (sessions, the
    prefetch) cannot hold an upload off forever. A thread already reading reads again without
    waiting (its read would otherwise deadlock behind the writer waiting for it), and may not
    start to write: DuckDB refuses a read-write connection to a file the process has open
    read-only.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._depth = 0
        self._writers_waiting = 0
        self._mine = threading.local()  # this thread's read depth

    @contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        depth = getattr(self._mine, "depth", 0)
        with self._cv:
            if depth == 0 and self._writer != me:
                self._cv.wait_for(lambda: self._writer is None and self._writers_waiting == 0)
            self._readers += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            with self._cv:
                self._readers -= 1
                self._cv.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        if getattr(self._mine, "depth", 0) and self._writer != me:
            raise RuntimeError("a store read is open in this thread: close it before writing")
        with self._cv:
            self._writers_waiting += 1
            try:
                self._cv.wait_for(lambda: self._writer == me
                                  or (self._writer is None and self._readers == 0))
            finally:
                self._writers_waiting -= 1
            self._writer = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cv:
                self._depth -= 1
                if self._depth == 0:
                    self._writer = None
                self._cv.notify_all()


_STORE_LOCK = StoreLock()


@dataclass(frozen=True)
class DataSource:
    """The store a view reads: its file, a version that changes when the file does, or why not
    (``problem`` is Markdown-safe: its data-borne parts went through code() or md())."""

    label: str
    path: str | None
    version: str
    problem: str | None = None


def file_version(path: Path) -> str:
    """Changes whenever the store file does: keys the caches of everything read from it."""
    try:
        st_ = path.stat()
    except OSError:
        return "missing"
    wal = path.with_name(path.name + ".wal")
    wal_part = f"-{wal.stat().st_mtime_ns}" if wal.exists() else ""
    return f"{st_.st_mtime_ns}-{st_.st_size}{wal_part}"


def store_folder() -> Path:
    """The data folder that store paths from links and the sidebar are confined to."""
    return data_dir(config_file())


def upload_target(v: ViewSettings) -> Path:
    """Where uploads are written: the chosen DuckDB file, else the uploads store (never the sample).

    Raises ConfigError when the chosen file is outside the data folder (nothing is created).
    """
    file = v.db_file(store_folder()) if v.source == "duckdb" else None
    return file if file is not None else uploads_db_path()


@contextmanager
def open_store(path: str | Path, *, read_only: bool = True) -> Iterator[Store]:
    with _STORE_LOCK.reading() if read_only else _STORE_LOCK.writing():
        store = Store(path, read_only=read_only)
        try:
            yield store
        finally:
            store.close()


def writer(target: str | Path) -> Callable[[], AbstractContextManager[Store]]:
    """The store ``target`` opened for writing under the app's store lock, as
    :mod:`analytics.writes` takes it (``open_writer``): the only way a page opens a store to write,
    and only to hand it to those checked writes (``tests/test_access_writes.py`` scans for others)."""
    return lambda: open_store(target, read_only=False)


def mapping_file(target: Path) -> Path:
    """Where the Data page keeps a store's column mapping: beside it, so a re-load reuses it."""
    return target.with_name(target.name + ".columns.toml")


def config_file() -> Path:
    """``tidelens.toml``: the workload map the app reads and the Data page saves."""
    return config_location()


def config_version() -> str:
    return file_version(config_file())


def load_workload_map() -> Any:
    return load_map(config_file())


@dataclass
class UploadOutcome:
    """One uploaded file's result as the Data page lists it."""

    file: str
    status: str
    series: int = 0
    samples: int = 0
    message: str = ""


def load_upload(target: Path, name: str, data: bytes, at_ms: int | None, columns: Any = None, *,
                who: Identity) -> UploadOutcome:
    """Load one uploaded file into ``target`` through a short-lived read-write connection
    (through a column mapping, :mod:`analytics.ingest.mapping`, when ``columns`` is one); an
    archive's members are summed into one outcome (:func:`load_uploads` lists them). ``who``
    (the session's visitor, ``pages/_access.identity``) must be allowed to load."""
    outs = load_uploads(target, name, data, at_ms, columns, who=who)
    if len(outs) == 1 and outs[0].file == name:
        return outs[0]
    failed = [o for o in outs if o.status == "failed"]
    status = "failed" if failed and len(failed) == len(outs) else "loaded" if any(
        o.status == "loaded" for o in outs) else "failed" if failed else "skipped"
    counts = {s: sum(o.status == s for o in outs) for s in ("loaded", "skipped", "failed")}
    message = ", ".join(f"{n} {s}" for s, n in counts.items() if n) + " member(s)"
    message += "".join(f"; {o.message}" if o.status == "failed" else f"; {o.file}: {o.message}"
                       for o in outs if o.status == "failed" or (o.status == "loaded" and o.message))
    return UploadOutcome(name, status, sum(o.series for o in outs), sum(o.samples for o in outs), message)


def load_uploads(target: Path, name: str, data: bytes, at_ms: int | None, columns: Any = None, *,
                 who: Identity) -> list[UploadOutcome]:
    """Like :func:`load_upload`, one outcome per source: an archive's members each their own
    (``archive!member``), any other file one. Loaded by :func:`analytics.writes.load_upload`,
    which checks ``who``'s role first and records the load."""
    why = not_data_reason(Path(name))
    if why is not None:
        return [UploadOutcome(name, "skipped", message=f"not a data file ({why})")]
    try:
        results = checked_load(who, writer(target), name, data, at_ms=at_ms, columns=columns)
    except TidelensError as exc:
        return [UploadOutcome(name, "failed", message=str(exc))]
    except Exception as exc:  # noqa: BLE001 - a parser bug must not take the page down
        return [UploadOutcome(name, "failed", message=f"{name}: internal error "
                              f"({type(exc).__name__}: {exc}); please report it with the file")]
    outs = []
    for r in results:
        note = r.error or r.note or ""
        if r.status == "loaded" and r.duplicates:
            note = (note + "; " if note else "") + f"{r.duplicates} duplicate samples (last kept)"
        outs.append(UploadOutcome(r.name, r.status, r.series, r.samples, note))
    return outs
