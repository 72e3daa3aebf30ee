"""``tidelens.toml``: which file is the configuration, and its one parse.

The app, every command and the live pulls read the same file by one rule
(:func:`config_location`): the path given (``--config``), else ``$TIDELENS_CONFIG``, else
``tidelens.toml`` in the working directory (the repository's root under ``make run``). It is
parsed once per version of the file (:func:`read_config`); each section is validated by the
module that owns it: ``[map]``, ``[[rule]]`` and ``[[autoscaler]]`` by
:mod:`analytics.workloads`, ``[slo]`` by :mod:`analytics.slo`, ``[live]`` by
:mod:`analytics.live.client`, ``[app]`` by :mod:`analytics.data_dir`.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "tidelens.toml")
>>> _ = open(path, "w").write('[slo]\\nchat = 1000\\n')
>>> config_section(path, "slo")
{'chat': 1000}
"""

from __future__ import annotations

import copy
import os
import threading
import tomllib
from pathlib import Path
from typing import Any

from analytics.errors import ConfigError

CONFIG_ENV = "TIDELENS_CONFIG"
CONFIG_NAME = "tidelens.toml"

_PARSED: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}
_LOCK = threading.Lock()


def config_location(explicit: str | Path | None = None) -> Path:
    """The configuration file's path, whether or not it exists yet (the Data page saves there):
    ``explicit``, else ``$TIDELENS_CONFIG``, else ``./tidelens.toml``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
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

    Raises :class:`ConfigError` naming the file for text that is not UTF-8 or not TOML.
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
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}; fix the TOML syntax") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the configuration ({exc.strerror})") from None
    with _LOCK:
        _PARSED[p] = (sig, doc)
    return copy.deepcopy(doc)


def config_section(path: str | Path | None, name: str) -> dict[str, Any]:
    """Table ``[name]`` of the file (``{}`` when absent); a key that is not a table is refused."""
    value = read_config(path).get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {name} must be a table ([{name}]), not {type(value).__name__}")
    return value
