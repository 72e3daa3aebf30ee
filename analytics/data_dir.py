"""The data folder: the one place a shared server opens or creates stores named in a URL.

A link carries ``?source=duckdb&db=...``, and anyone can type one. Without a fence, the app would
open (and, on upload, create folders and a store) wherever the server process may write. A store
path from a URL is therefore confined to the data folder: ``$TIDELENS_DATA_DIR``, else
``[app] data_dir`` in ``tidelens.toml`` (relative to that file), else ``data/`` beside the app.
A relative path is taken inside the folder; symlinks and ``..`` are resolved before the check. A
name longer than the file system takes (a part over ``NAME_MAX``, 255 bytes on Linux, or the whole
over ``PATH_MAX``) is refused in words before anything touches the disk (a 5,000-character ``?db=``
was an ``[Errno 36] File name too long`` exception on the Data page).
The operator's own settings (``TIDELENS_UPLOADS_DB``, the CLI's ``--db``) are not confined:
they are not typed by a visitor.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> confine_store_path("team.duckdb", folder) == (folder / "team.duckdb").resolve()
True
>>> confine_store_path("../etc/x.duckdb", folder)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
analytics.errors.ConfigError: store '../etc/x.duckdb' is outside the data folder ...
"""

from __future__ import annotations

import os
from pathlib import Path

from analytics.config import DATA_DIR_ENV, env_setting, read_config
from analytics.errors import ConfigError

CONFIG_KEY = "[app] data_dir"
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"
STORE_SUFFIX = ".duckdb"
# How much of a refused store name a message quotes (a link can carry thousands of characters).
SHOWN_CHARS = 80
# The longest suffix of a file kept beside a store (the Data page's saved mapping, ".columns.toml";
# DuckDB's ".wal"): a store name must leave room for it.
SIDE_FILE_BYTES = len(".columns.toml")


def data_dir(config_path: str | Path | None = None) -> Path:
    """The data folder, resolved: ``$TIDELENS_DATA_DIR``, ``[app] data_dir``, else ``data/``.

    Raises :class:`ConfigError` naming the file when ``tidelens.toml`` cannot be read or the key
    is not a string.
    """
    env = env_setting(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if config_path is not None:

        path = Path(config_path)
        if path.is_file():
            doc = read_config(path)
            value = doc.get("app", {}).get("data_dir") if isinstance(doc.get("app"), dict) else None
            if value is not None:
                if not isinstance(value, str) or not value.strip():
                    raise ConfigError(f"{path}: {CONFIG_KEY} must be a folder path string")
                folder = Path(value).expanduser()
                return (folder if folder.is_absolute() else path.parent / folder).resolve()
    return DEFAULT_DATA_DIR.resolve()


def _shown(raw: str) -> str:
    """``raw`` quoted for a message: whole when short, else its start and its length."""
    return repr(raw) if len(raw) <= SHOWN_CHARS else f"{raw[:SHOWN_CHARS]!r}… ({len(raw):,} characters)"


def _name_limits(folder: Path) -> tuple[int, int]:
    """``(NAME_MAX, PATH_MAX)`` in bytes of the file system holding ``folder`` (POSIX's defaults elsewhere)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or the folder is gone
        return 255, 4096


def confine_store_path(raw: str, folder: Path) -> Path:
    """``raw`` (from a URL or the sidebar) as a store path inside ``folder``, or ConfigError.

    Accepted: a ``.duckdb`` file inside the folder (or a subfolder that exists); a new one is
    allowed (an upload creates it) but no folder is ever created for it.
    """
    base = folder.resolve()
    where = (f"the data folder {base} ({CONFIG_KEY} in tidelens.toml, or ${DATA_DIR_ENV})")
    if "\x00" in raw:
        raise ConfigError(f"store path {_shown(raw)} holds a NUL byte; name a file in {where}")
    name_max, path_max = _name_limits(base)
    parts = [len(os.fsencode(part)) for part in Path(raw).parts] or [0]
    if (max(parts) > name_max or parts[-1] + SIDE_FILE_BYTES > name_max
            or len(os.fsencode(str(base / raw))) + SIDE_FILE_BYTES >= path_max):
        raise ConfigError(f"store {_shown(raw)} is longer than the file system takes (a name at most "
                          f"{name_max - SIDE_FILE_BYTES:,} bytes, leaving room for the files kept beside a store, "
                          f"a path {path_max - SIDE_FILE_BYTES:,}); name a file in {where}")
    given = Path(raw).expanduser()
    try:
        resolved = (given if given.is_absolute() else base / given).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ConfigError(f"store {_shown(raw)} cannot be resolved ({exc}); name a file in {where}") from exc
    if not resolved.is_relative_to(base):
        raise ConfigError(f"store {_shown(raw)} is outside {where}: this server opens and creates "
                          "stores only there. Copy the store into that folder, or ask the "
                          f"deployment's owner to set {CONFIG_KEY} to the folder that holds it")
    if resolved.suffix != STORE_SUFFIX:
        raise ConfigError(f"store {_shown(raw)} does not end in {STORE_SUFFIX}; name a DuckDB store "
                          f"file in {where}")
    try:
        folder_there = resolved.parent.is_dir()
    except OSError as exc:  # a link's target made the resolved path too long
        raise ConfigError(f"store {_shown(raw)} cannot be resolved ({exc.strerror}); name a file in {where}") from exc
    if not folder_there:
        raise ConfigError(f"store {_shown(raw)}: folder {resolved.parent} does not exist in {where}; "
                          "the app creates stores, never folders")
    return resolved
