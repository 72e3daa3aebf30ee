"""The settings: ``tidelens.toml`` (which file is the configuration, and its one parse), and
every ``TIDELENS_*`` environment variable (:data:`ENV_SETTINGS`, read by :func:`env_setting`
alone; each module that owns a setting checks its text).

The app, every command and the live pulls read the same file by one rule
(:func:`config_location`): the path given (``--config``), else ``$TIDELENS_CONFIG``, else
``tidelens.toml`` in the working directory (the repository's root under ``make run``). It is
parsed once per version of the file (:func:`read_config`); each section is validated by the
module that owns it: ``[map]``, ``[[rule]]`` and ``[[autoscaler]]`` by
:mod:`analytics.workloads`, ``[slo]`` by :mod:`analytics.slo`, ``[live]`` by
:mod:`analytics.live.client`, ``[app]`` by :mod:`analytics.data_dir`, ``[access]`` by
:mod:`analytics.access` (a typed section: :func:`typed_section` builds its dataclass, checking
every key and type). A file the app changes keeps its previous version beside it
(:func:`keep_previous`).

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "tidelens.toml")
>>> _ = open(path, "w").write('[slo]\\nchat = 1000\\n')
>>> config_section(path, "slo")
{'chat': 1000}
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import shutil
import threading
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from analytics.errors import ConfigError

CONFIG_ENV = "TIDELENS_CONFIG"
CONFIG_NAME = "tidelens.toml"
DATA_DIR_ENV = "TIDELENS_DATA_DIR"
UPLOADS_DB_ENV = "TIDELENS_UPLOADS_DB"
TIME_WINDOW_ENV = "TIDELENS_TIME_WINDOW"
LOCK_WAIT_ENV = "TIDELENS_LOCK_WAIT_S"
PREFETCH_ENV = "TIDELENS_PREFETCH"
TOKEN_ENV = "TIDELENS_TOKEN"
GRAFANA_TOKEN_ENV = "TIDELENS_GRAFANA_TOKEN"
RESULT_CACHE_ENVS = ("TIDELENS_CACHE_DIR", "TIDELENS_CACHE_MB")
# The bounds on one load (analytics.limits.IngestLimits, a field each).
LIMIT_ENVS = ("TIDELENS_MAX_GZIP_RATIO", "TIDELENS_MAX_DECOMPRESSED_BYTES", "TIDELENS_MAX_LINE_BYTES",
              "TIDELENS_MAX_SERIES_PER_SOURCE", "TIDELENS_MAX_SERVICES_PER_SOURCE", "TIDELENS_MAX_COLUMNS",
              "TIDELENS_MAX_ARCHIVE_MEMBERS", "TIDELENS_MAX_LATENCY_S")
# Every environment variable Tidelens reads and the module that checks its text; docs/deployment.md
# has a row for each (tests/test_settings.py holds both, and that no other module reads one).
ENV_SETTINGS: dict[str, str] = {
    CONFIG_ENV: "analytics.config", DATA_DIR_ENV: "analytics.data_dir", UPLOADS_DB_ENV: "analytics.view",
    TIME_WINDOW_ENV: "analytics.sink", LOCK_WAIT_ENV: "analytics.store_file", PREFETCH_ENV: "pages._prefetch",
    TOKEN_ENV: "serve", GRAFANA_TOKEN_ENV: "analytics.cli.export_cmd",
    **{name: "analytics.limits" for name in LIMIT_ENVS},
    **{name: "analytics.resultcache" for name in RESULT_CACHE_ENVS},
}

PREVIOUS_SUFFIX = ".prev"
T = TypeVar("T")
# Tables and arrays nested deeper than this are refused: a real tidelens.toml nests 3 levels, and
# tomllib (and every reader after it: a deep copy, a walk) recurses once per level, so a file
# nested 50,000 levels raised RecursionError on the page and a traceback in the CLI.
MAX_DEPTH = 32
# The largest tidelens.toml read: a 500-rule map is about 60 KB; tomllib took 3.4 s over one
# 2 MB pattern before the map could refuse it.
MAX_CONFIG_BYTES = 1 << 20

_PARSED: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}
_LOCK = threading.Lock()


def env_setting(name: str) -> str | None:
    """The text of the environment setting ``name`` (``None`` when unset): the one read of a
    ``TIDELENS_*`` variable, whose owner (:data:`ENV_SETTINGS`) checks it.

    Raises ``KeyError`` for a name that is not one of :data:`ENV_SETTINGS` (a new setting is
    listed there and in docs/deployment.md first).
    """
    if name not in ENV_SETTINGS:
        raise KeyError(f"{name}: not a Tidelens setting; add it to analytics.config.ENV_SETTINGS")
    return os.environ.get(name)


def take_env_setting(name: str) -> str | None:
    """Like :func:`env_setting`, and the variable removed from this process's environment, so no
    program it starts sees it (the operator's token)."""
    value = env_setting(name)
    os.environ.pop(name, None)
    return value


def config_location(explicit: str | Path | None = None) -> Path:
    """The configuration file's path, whether or not it exists yet (the Data page saves there):
    ``explicit``, else ``$TIDELENS_CONFIG``, else ``./tidelens.toml``."""
    if explicit:
        return Path(explicit)
    env = env_setting(CONFIG_ENV)
    return Path(env) if env else Path(CONFIG_NAME)


def find_config(explicit: str | Path | None = None) -> Path | None:
    """The configuration file to read, or ``None`` when there is none (the built-in defaults).

    Raises :class:`ConfigError` when ``explicit`` names a file that is not there (a typo in
    ``--config`` is never silently the defaults)."""
    path = config_location(explicit)
    if path.is_file():
        return path
    if explicit:
        raise ConfigError(f"{path}: no such config file; copy tidelens.example.toml to start one")
    return None


def read_config(path: str | Path | None) -> dict[str, Any]:
    """The parsed file (``{}`` for ``None`` or a missing file), parsed once per version of it.

    Raises :class:`ConfigError` naming the file for text that is not UTF-8 or not TOML, a file
    over :data:`MAX_CONFIG_BYTES`, or one nested too deep (:func:`read_toml_file`).
    """
    if path is None:
        return {}
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return {}
    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _LOCK:
        known = _PARSED.get(p)
    if known is not None and known[0] == sig:
        return copy.deepcopy(known[1])  # a caller's edit never reaches the next reader
    doc = read_toml_file(p, "configuration", "a 500-rule map is about 60 KB: shorten its patterns or split its rules")
    with _LOCK:
        _PARSED[p] = (sig, doc)
    return copy.deepcopy(doc)


def read_toml_file(path: str | Path, what: str, shorten: str) -> dict[str, Any]:
    """The TOML file at ``path`` (``tidelens.toml``, a column mapping), read and parsed by one rule.

    Parameters
    ----------
    path:
        The file.
    what:
        What the file is, for the messages ("configuration", "column mapping").
    shorten:
        What to do with a file over :data:`MAX_CONFIG_BYTES`, for its message.

    Raises
    ------
    ConfigError
        Naming the file: over :data:`MAX_CONFIG_BYTES` (refused before it is read), unreadable,
        not UTF-8, not TOML, or nested too deep (:func:`parse_toml`).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{p}: {size:,} bytes; a {what} is at most {MAX_CONFIG_BYTES:,} ({shorten})")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the {what} as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the {what} ({exc.strerror})") from None
    return parse_toml(text, str(p))


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``text`` parsed as TOML: the one parse of a Tidelens TOML file (``tidelens.toml``, a saved
    what-if scenario).

    Raises :class:`ConfigError` naming ``source`` for text that is not TOML, or that nests tables
    and arrays more than :data:`MAX_DEPTH` levels deep (say so, never a ``RecursionError``).

    >>> parse_toml("a = [[[1]]]", "x.toml")
    {'a': [[[1]]]}
    >>> parse_toml("a = " + "[" * 40 + "]" * 40, "x.toml")
    Traceback (most recent call last):
    ...
    analytics.errors.ConfigError: x.toml: nested more than 32 levels deep (tables and arrays); a Tidelens configuration nests 3: flatten it
    """
    too_deep = ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep (tables and arrays); "
                           "a Tidelens configuration nests 3: flatten it")
    if _looks_too_deep(text):
        raise too_deep
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}; fix the TOML syntax") from None
    except RecursionError:  # what the scan below missed: deeper than the interpreter allows
        raise too_deep from None
    if _depth(doc) > MAX_DEPTH:
        raise too_deep
    return doc


# TOML strings and comments, which may hold any bracket or dot (a scan of the text skips them).
_STRINGS = re.compile(r'"""(?:[^"\\]++|\\.|"(?!""))*+"""|\'\'\'(?:[^\']++|\'(?!\'\'))*+\'\'\'|'
                      r'"(?:[^"\\\n]++|\\.)*+"|\'[^\'\n]*+\'|#[^\n]*+', re.S)
_KEYISH = re.compile(r"[A-Za-z0-9_.\s-]+")  # a run a dotted key lies in (floats are split by commas)


def _looks_too_deep(text: str) -> bool:
    """Whether the text, its strings and comments left out, opens more than :data:`MAX_DEPTH`
    brackets at once or names a dotted key of more parts: refused before tomllib spends
    seconds on it (a key of 50,000 dotted parts took it 64 s)."""
    bare = _STRINGS.sub("s", text)
    if any(m.group().count(".") >= MAX_DEPTH for m in _KEYISH.finditer(bare)):
        return True
    depth = 0
    for m in re.finditer(r"[\[\]{}]", bare):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return True
    return False


def _depth(doc: Any) -> int:
    """How many tables and arrays deep ``doc`` nests (the top table is 1), walked without
    recursion so that the check itself cannot exhaust the stack."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        children = node.values() if isinstance(node, dict) else node
        todo.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def config_section(path: str | Path | None, name: str) -> dict[str, Any]:
    """Table ``[name]`` of the file (``{}`` when absent); a key that is not a table is refused."""
    value = read_config(path).get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {name} must be a table ([{name}]), not {type(value).__name__}")
    return value


def typed_section(path: str | Path | None, name: str, cls: type[T]) -> T | None:
    """Table ``[name]`` of the file as the dataclass ``cls`` (``None`` when the table is absent).

    Every key must be a field of ``cls`` and hold the field's type (a ``tuple[str, ...]`` field
    takes a TOML list of strings); a wrong one is refused naming the file, the key, what was
    there, and the field's help text.
    """
    doc = read_config(path)
    if name not in doc:
        return None
    table = config_section(path, name)
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in table.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"{path}: [{name}] {key}: not a setting of [{name}]; known: "
                              f"{', '.join(known)}")
        values[key] = _typed(value, hints[key], f"{path}: [{name}] {key}",
                             str(f.metadata.get("help", "")))
    try:
        return cls(**values)
    except ValueError as exc:  # the dataclass's own checks (__post_init__) name the key
        raise ConfigError(f"{path}: [{name}] {exc}") from None


def _typed(value: Any, hint: Any, where: str, help_text: str) -> Any:
    """``value`` as type ``hint`` (str, bool, int, float, a tuple of one of them), or ConfigError."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: must be a list ({help_text}), not {type(value).__name__}")
        return tuple(_typed(v, inner, f"{where}[{i}]", help_text) for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    ok = isinstance(value, hint) and not (hint in (int, float) and isinstance(value, bool))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise ConfigError(f"{where}: must be a {hint.__name__} ({help_text}), not {value!r}"[:600])
    return value


def keep_previous(path: str | Path) -> Path | None:
    """Copy ``path`` to ``<path>.prev`` before it is changed: the version it replaces is kept
    beside it (one back; the store's audit record says who changed it and when). ``None`` when
    there was no file yet."""
    p = Path(path)
    if not p.is_file():
        return None
    prev = p.with_name(p.name + PREVIOUS_SUFFIX)
    shutil.copy2(p, prev)
    return prev
