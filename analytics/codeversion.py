"""What a cached result was computed by: a digest of the content of the library's own code.

The app keeps heavy results (timelines, events, calibrations) on disk across restarts. A
result is only as good as the code that made it, and an analysis reaches far across the
package (a definition in :mod:`analytics.measures` changes events, the what-if and the
review), so the key is the whole package's source, not a hand-kept list of modules that
misses one the day it changes. Files are read again only when their size or modification
time changes, and the walk itself (about 4 ms of stats) is trusted for ``max_age_s`` (2 s),
since one page run asks several times.

>>> a = code_digest()
>>> a == code_digest() and len(a) == 16
True
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent

_FILES: dict[Path, tuple[tuple[int, int, int], str]] = {}  # path -> (stat signature, content digest)
_WALKS: dict[Path, tuple[float, str]] = {}  # root -> (when walked, digest)
_LOCK = threading.Lock()


def code_digest(root: Path | None = None, *, max_age_s: float = 2.0) -> str:
    """A 16-hex-digit digest of every ``.py`` file under ``root`` (default: this package), by
    content and relative path, so that two checkouts of the same code agree and any edit to
    any module of the package changes it (seen within ``max_age_s``; 0 walks every time)."""
    base = Path(root) if root is not None else PACKAGE_ROOT
    now = time.monotonic()
    with _LOCK:
        walked = _WALKS.get(base)
    if walked is not None and now - walked[0] < max_age_s:
        return walked[1]
    whole = hashlib.sha1()
    for path in sorted(base.rglob("*.py")):
        whole.update(path.relative_to(base).as_posix().encode())
        whole.update(b"\0")
        whole.update(_file_digest(path).encode())
        whole.update(b"\n")
    digest = whole.hexdigest()[:16]
    with _LOCK:
        _WALKS[base] = (now, digest)
    return digest


def _file_digest(path: Path) -> str:
    st = path.stat()
    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _LOCK:
        known = _FILES.get(path)
    if known is not None and known[0] == sig:
        return known[1]
    digest = hashlib.sha1(path.read_bytes()).hexdigest()
    with _LOCK:
        _FILES[path] = (sig, digest)
    return digest
