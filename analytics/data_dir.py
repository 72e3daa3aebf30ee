"""The data folder: the one place a shared server opens or creates stores named in a URL.

A link carries ``?source=duckdb&db=...``, and anyone can type one. Without a fence, the app would
open (and, on upload, create folders and a store) wherever the server process may write. A store
path from a URL is therefore confined to the data folder: ``$TIDELENS_DATA_DIR``, else
``[app] data_dir`` in ``tidelens.toml`` (relative to that file), else ``data/`` beside the app.
A relative path is taken inside the folder; symlinks and ``..`` are resolved before the check.
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

from analytics.errors import ConfigError

DATA_DIR_ENV = "TIDELENS_DATA_DIR"
CONFIG_KEY = "[app] data_dir"
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"
STORE_SUFFIX = ".duckdb"


def data_dir(config_path: str | Path | None = None) -> Path:
    """The data folder, resolved: ``$TIDELENS_DATA_DIR``, ``[app] data_dir``, else ``data/``.

    Raises :class:`ConfigError` naming the file when ``tidelens.toml`` cannot be read or the key
    is not a string.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if config_path is not None:
        from analytics.config import read_config

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


def confine_store_path(raw: str, folder: Path) -> Path:
    """``raw`` (from a URL or the sidebar) as a store path inside ``folder``, or ConfigError.

    Accepted: a ``.duckdb`` file inside the folder (or a subfolder that exists); a new one is
    allowed (an upload creates it) but no folder is ever created for it.
    """
    base = folder.resolve()
    where = (f"the data folder {base} ({CONFIG_KEY} in tidelens.toml, or ${DATA_DIR_ENV})")
    if "\x00" in raw:
        raise ConfigError(f"store path {raw!r} holds a NUL byte; name a file in {where}")
    given = Path(raw).expanduser()
    try:
        resolved = (given if given.is_absolute() else base / given).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
        raise ConfigError(f"store {raw!r} cannot be resolved ({exc}); name a file in {where}") from exc
    if not resolved.is_relative_to(base):
        raise ConfigError(f"store {raw!r} is outside {where}: this server opens and creates "
                          "stores only there. Copy the store into that folder, or ask the "
                          f"deployment's owner to set {CONFIG_KEY} to the folder that holds it")
    if resolved.suffix != STORE_SUFFIX:
        raise ConfigError(f"store {raw!r} does not end in {STORE_SUFFIX}; name a DuckDB store "
                          f"file in {where}")
    if not resolved.parent.is_dir():
        raise ConfigError(f"store {raw!r}: folder {resolved.parent} does not exist in {where}; "
                          "the app creates stores, never folders")
    return resolved
