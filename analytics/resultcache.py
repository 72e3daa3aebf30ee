"""The one cache of computed results, read by every surface: the app, the CLI and a notebook.

The timelines, the tail events, a signal's rhythm and a service's calibration are computed once
per (store content, range, settings, code) and kept on disk, so ``tidelens events`` run twice,
or run after the app has shown the same range, reads what was computed instead of computing it
again. What this module owns:

- the key: a SHA-256 of the result's kind, its settings (:func:`canonical`: dataclasses,
  mappings and frames by content, so the app and the CLI spell the same settings alike) and the
  library's code digest (:func:`analytics.codeversion.code_digest`), under the store's
  :class:`Scope` (which file, and a digest of its loaded sources: ids, content hashes, counts,
  load times). A load into the store changes its sources, so its results are never read again,
  and the first result written after it removes that file's older ones;
- the folder (``$TIDELENS_CACHE_DIR``, else ``~/.cache/tidelens``; ``off`` for none), bounded by ``$TIDELENS_CACHE_MB`` (default 2048):
  the least recently used files go first (:func:`usage` for ``tidelens sources``);
- two processes at once: each result is written to a temporary file in the folder and moved
  into place with :func:`os.replace`, so a reader sees a whole file or none; two processes
  missing together both compute and the second write replaces the first with equal content;
- the format: pickle, because a result is a dataclass of polars frames with nested notes and
  evidence, and pickle keeps all of it in one read. Reading a pickle runs code, so the folder
  must be one only this user can write: it is created ``0700``, and a folder or file owned by
  someone else, or writable by group or others, is refused with a message, never read;
- the counts (:func:`counts`): hits in memory, hits on disk and misses per kind, which the
  tests read to show that a warm command computes nothing (never seconds).

A result that depends on its inputs alone (a service's fit, whichever store its steps came from)
is kept by :func:`remembered_by_inputs` under a digest of those inputs instead of a store's scope:
the app, the CLI and a notebook asking for the same fit on a copy of a store, or on another range
with the same steps, read it.

A small memory layer keeps the last results of this process as the objects themselves (the
app reads them on every rerun; a frame is never changed in place).

>>> canonical({"b": 1.0, "a": [1, 2]}) == canonical({"a": (1, 2), "b": 1.0})
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import stat
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from analytics.codeversion import code_digest
from analytics.config import env_setting
from analytics.errors import ConfigError

CACHE_DIR_ENV = "TIDELENS_CACHE_DIR"
CACHE_MB_ENV = "TIDELENS_CACHE_MB"
DEFAULT_CACHE_MB = 2048
MEMORY_ENTRIES = 16
SUFFIX = ".pkl"

T = TypeVar("T")
_MEMORY: OrderedDict[tuple[Path | None, str], Any] = OrderedDict()
_COUNTS: Counter[tuple[str, str]] = Counter()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Scope:
    """One store's content: which file (``store``, a digest of its real path) and what is
    loaded in it (``content``, a digest of its sources)."""

    store: str
    content: str


@dataclass(frozen=True)
class CacheUsage:
    """What the cache folder holds (``folder`` is ``None`` when the cache is off)."""

    folder: Path | None
    files: int
    bytes: int
    limit_bytes: int


def canonical(value: Any) -> Any:
    """``value`` as nested tuples of plain values, equal for equal settings however they were
    built (a mapping in any order, a list or a tuple, a frame by its content)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,
                tuple((f.name, canonical(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if isinstance(value, Mapping):
        return ("{}", tuple(sorted(((repr(canonical(k)), canonical(v)) for k, v in value.items()),
                                   key=lambda kv: kv[0])))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(canonical(v)) for v in value)))
    if isinstance(value, pl.DataFrame):
        return ("frame", hashlib.sha256(value.write_csv().encode()).hexdigest())
    if isinstance(value, np.ndarray):
        # By every element (repr elides the middle of a long array: two arrays would share a key).
        data = np.ascontiguousarray(value)
        return ("array", str(data.dtype), data.shape, hashlib.sha256(data.tobytes()).hexdigest())
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def digest(*parts: Any) -> str:
    """A 32-hex-digit digest of ``parts`` by :func:`canonical`."""
    return hashlib.sha256(repr(canonical(parts)).encode()).hexdigest()[:32]


def scope_of(store: Any) -> Scope | None:
    """The :class:`Scope` of an open store (``None`` for an in-memory one: no file names it)."""
    if str(store.path) == ":memory:":
        return None
    src = store.sources()
    rows = src.select("id", "content_hash", "status", "samples", pl.col("loaded_at").cast(pl.Utf8)).rows()
    return Scope(digest(os.path.realpath(store.path))[:16], digest(rows)[:16])


def cache_folder() -> Path | None:
    """The folder results are kept in, or ``None`` when ``$TIDELENS_CACHE_DIR`` is ``off``."""
    named = env_setting(CACHE_DIR_ENV)
    if named is not None and named.strip().lower() in ("off", "0", "none"):
        return None
    if named:
        return Path(named).expanduser()
    return Path.home() / ".cache" / "tidelens"


def cache_limit_bytes() -> int:
    """The folder's bound, ``$TIDELENS_CACHE_MB`` (default :data:`DEFAULT_CACHE_MB`) in bytes.

    Raises ConfigError when the setting is not a whole number of megabytes.
    """
    text = env_setting(CACHE_MB_ENV)
    if text is None or not text.strip():
        return DEFAULT_CACHE_MB << 20
    try:
        mb = int(text)
    except ValueError:
        mb = -1
    if mb < 0:
        raise ConfigError(f"${CACHE_MB_ENV}={text!r}: the result cache's bound is a whole number of "
                          "megabytes (0 keeps nothing); set e.g. 2048")
    return mb << 20


def remembered(scope: Scope | None, kind: str, settings: Any, build: Callable[[], T]) -> T:
    """``build()``'s result for ``settings`` of one store's content, computed once.

    Parameters
    ----------
    scope:
        The store's :class:`Scope` (``None``: nothing identifies the data, so nothing is kept).
    kind:
        What the result is (``"timelines"``, ``"events"``...): a counter and a file name each.
    settings:
        Everything besides the store's content and the code that the result depends on.
    build:
        Computes the result on a miss.

    Raises
    ------
    ConfigError
        The cache folder (or a file in it) is not this user's alone.
    """
    if scope is None:
        return build()
    found = peek(scope, kind, settings)
    if found is not None:
        return found  # type: ignore[no-any-return]
    _COUNTS[(kind, "miss")] += 1
    value = build()
    folder = cache_folder()
    key = _key(scope, kind, settings)
    if folder is not None:
        _write(folder, scope, key, value)
    _keep(folder, key, value)
    return value


# The scope of results keyed by their inputs alone: no store's load removes them (only the bound).
INPUTS_SCOPE = Scope("inputs", "any")


def remembered_by_inputs(kind: str, inputs: Any, build: Callable[[], T]) -> T:
    """``build()``'s result for ``inputs``, everything it reads (arrays by content), computed once
    whichever store they came from; counted and bounded as :func:`remembered`'s."""
    return remembered(INPUTS_SCOPE, kind, inputs, build)


def peek(scope: Scope | None, kind: str, settings: Any) -> Any:
    """The result :func:`remembered` keeps for these arguments when it has one (counted as a hit),
    else ``None`` (counted as nothing: the caller computes it through :func:`remembered`). A warm
    command reads its answer without reading the inputs it was computed from."""
    if scope is None:
        return None
    key = _key(scope, kind, settings)
    folder = cache_folder()
    with _LOCK:
        if (folder, key) in _MEMORY:
            _MEMORY.move_to_end((folder, key))
            _COUNTS[(kind, "memory")] += 1
            return _MEMORY[(folder, key)]
    value = _read(folder, key) if folder is not None else None
    if value is not None:
        _COUNTS[(kind, "disk")] += 1
        _keep(folder, key, value)
    return value


def _keep(folder: Path | None, key: str, value: Any) -> None:
    with _LOCK:
        _MEMORY[(folder, key)] = value
        while len(_MEMORY) > MEMORY_ENTRIES:
            _MEMORY.popitem(last=False)


def _key(scope: Scope, kind: str, settings: Any) -> str:
    """A result's file name (without its suffix): the store's tags first, so a load can find and
    remove that store's older results."""
    return f"{scope.store}-{scope.content}-{kind}-{digest(kind, settings, code_digest())}"


def counts() -> dict[str, dict[str, int]]:
    """Per kind, this process's hits in memory (``memory``), on disk (``disk``) and misses (``miss``).

    >>> sorted(counts().get("doc", {}))
    []
    """
    out: dict[str, dict[str, int]] = {}
    with _LOCK:
        for (kind, how), n in _COUNTS.items():
            out.setdefault(kind, {})[how] = n
    return out


def misses() -> int:
    """How many results this process computed rather than read."""
    with _LOCK:
        return sum(n for (_, how), n in _COUNTS.items() if how == "miss")


def forget_in_memory() -> None:
    """Drop this process's memory layer and counts (the disk stays): what a new process sees."""
    with _LOCK:
        _MEMORY.clear()
        _COUNTS.clear()


def usage() -> CacheUsage:
    """The folder, its files and bytes, and its bound (what ``tidelens sources`` says)."""
    folder = cache_folder()
    limit = cache_limit_bytes()
    if folder is None or not folder.is_dir():
        return CacheUsage(folder, 0, 0, limit)
    sizes = [f.stat().st_size for f in folder.glob(f"*{SUFFIX}")]
    return CacheUsage(folder, len(sizes), sum(sizes), limit)


def _check_private(path: Path, what: str) -> os.stat_result:
    """``path``'s stat, refused unless this user owns it and nobody else may write it: a pickle
    another user could write would run their code here."""
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"{path}: the result cache's {what} must belong to this user and be writable "
                          f"by nobody else (owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}); "
                          f"run `chmod go-w {path}`, or set ${CACHE_DIR_ENV} to a folder of your own "
                          "(or to off)")
    return st


def _private_folder(folder: Path) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(folder, "folder")
    return folder


def _read(folder: Path, key: str) -> Any:
    path = folder / f"{key}{SUFFIX}"
    if not path.is_file():
        return None
    _private_folder(folder)
    _check_private(path, "file")
    try:
        with open(path, "rb") as fh:
            value = pickle.load(fh)
        os.utime(path)  # least recently used goes first
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError):
        return None  # pruned meanwhile, or written by code that has gone: computed again
    return value


def _write(folder: Path, scope: Scope, key: str, value: Any) -> None:
    limit = cache_limit_bytes()
    if limit <= 0:
        return
    _private_folder(folder)
    # This store's results from before its last load can never be read again.
    if scope != INPUTS_SCOPE:
        for old in folder.glob(f"{scope.store}-*{SUFFIX}"):
            if not old.name.startswith(f"{scope.store}-{scope.content}-"):
                old.unlink(missing_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".writing-", suffix=".tmp", dir=folder)
    except OSError:
        return  # a full or read-only disk costs the next run the computation, nothing more
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"{key}{SUFFIX}")
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _prune(folder, limit)


def _prune(folder: Path, limit: int) -> None:
    """Remove the least recently used files until the folder is within ``limit`` bytes."""
    files = []
    for f in folder.glob(f"*{SUFFIX}"):
        try:
            st = f.stat()
        except FileNotFoundError:
            continue  # another process pruned it
        files.append((st.st_mtime_ns, st.st_size, f))
    total = sum(size for _, size, _ in files)
    for _, size, f in sorted(files, key=lambda x: x[0]):
        if total <= limit:
            break
        f.unlink(missing_ok=True)
        total -= size
