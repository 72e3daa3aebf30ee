"""Every change a visitor of the app can make, each checked and recorded here: loading a file,
pulling from a server, sampling local GPUs, saving a column mapping, recording a change of the
pool's policy, changing the workload map.

Each function first checks the visitor's role (:func:`analytics.access.require`, raising
:class:`~analytics.errors.AccessDenied` before anything is opened, written or sent), then does
the write, then adds a row to the store's audit record (:mod:`analytics.audit`) naming who, what
and the sources or map digests it changed. The pages call these and nothing else to write
(``tests/test_access_writes.py`` walks every write widget as each role, and fails on a page that
opens a store for writing any other way): a widget a viewer does not see is a courtesy, this is
the check.

Stores are opened through ``open_writer`` (a function returning a context manager of a writable
:class:`~analytics.store.Store`): the app passes its own, which holds the process-wide store
lock (``pages/_store.py``).
"""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from analytics.access import Identity, allows, check_pull, require
from analytics.audit import last_source_id, record, sources_since
from analytics.change.record import PolicyChange, record_change
from analytics.destinations import safe_url
from analytics.errors import TidelensError
from analytics.ingest import ingest_upload
from analytics.workloads import load_map, map_digest, save_map

if TYPE_CHECKING:
    from analytics.live.client import AuthConfig
    from analytics.sink import LoadResult
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

OpenWriter = Callable[[], AbstractContextManager["Store"]]


def _outcome(sources: list[dict[str, str]]) -> str:
    return "loaded" if any(s["status"] == "loaded" for s in sources) else "failed"


@contextmanager
def recorded(store: "Store", who: Identity, action: str, what: str) -> Iterator[None]:
    """Record the sources written to ``store`` inside the block (a block that fails too: what it
    wrote before failing is in the store); a block that wrote none leaves no row. The commands
    (``tidelens ingest``, ``pull``) use it with :func:`analytics.access.command_line_identity`."""
    before = last_source_id(store)
    try:
        yield
    finally:
        written = sources_since(store, before)
        if written:  # the same file again writes nothing, and is no change
            record(store, who, action, _outcome(written), what, sources=written)


def load_upload(who: Identity, open_writer: OpenWriter, name: str, data: bytes, *,
                at_ms: int | None = None, columns: Any = None) -> list["LoadResult"]:
    """Load one uploaded file (an archive member by member) and record it.

    Raises :class:`~analytics.errors.AccessDenied` for a visitor who may not load (nothing is
    opened), and what :func:`analytics.ingest.ingest_upload` raises (the failure recorded too).
    """

    require(who, "load")
    digest = hashlib.sha256(data).hexdigest()
    with open_writer() as store, recorded(store, who, "load", f"{name} (sha256 {digest[:16]})"):
        return ingest_upload(store, name, data, at_ms=at_ms, columns=columns)


def pull(who: Identity, url: str, auth: "AuthConfig", *, allowed: list[str] | None,
         listed: dict[str, list[str]] | None, open_writer: OpenWriter,
         make_client: Callable[[], Any], run: Callable[["Store", Any], Any]) -> Any:
    """Pull from ``url`` into the store (``run(store, client)``, e.g. :func:`analytics.live.pull`)
    and record every source it wrote, a pull cut short by an error too, and an editor's pull that
    was refused (the server, and why).

    Refused before any request (:func:`analytics.access.check_pull`): a visitor who may not pull,
    a server the operator did not list, a secret not listed for that server; and, by the client,
    link-local and metadata addresses (:func:`analytics.outbound.check_destination`).
    """

    try:
        check_pull(who, url, auth.secret_names(), allowed, listed)
        client_cm = make_client()
    except TidelensError as exc:
        if allows(who, "pull"):  # an editor's refused pull is recorded; a viewer cannot fill the record
            with open_writer() as store:
                record(store, who, "pull", "refused", f"{safe_url(url)}: {exc}"[:500])
        raise
    with client_cm as client, open_writer() as store, recorded(store, who, "pull", safe_url(url)):
        return run(store, client)


def collect(who: Identity, open_writer: OpenWriter, run: Callable[[], Any]) -> Any:
    """Sample local GPUs (``run()``, which opens the store per flush) and record the sources."""
    require(who, "load")
    with open_writer() as store:
        before = last_source_id(store)
    try:
        return run()
    finally:
        with open_writer() as store:
            written = sources_since(store, before)
            if written:
                record(store, who, "collect", _outcome(written), "local GPUs (NVML)", sources=written)


def save_mapping(who: Identity, open_writer: OpenWriter, text: str, path: Path) -> None:
    """Save a column mapping beside its store (what the next load of such a table reuses)."""
    require(who, "save_mapping")
    path.write_text(text, encoding="utf-8")
    with open_writer() as store:
        record(store, who, "mapping", "saved", path.name,
               sources=[{"name": path.name, "hash": hashlib.sha256(text.encode()).hexdigest(),
                         "status": "saved"}])


def record_policy_change(who: Identity, open_writer: OpenWriter, change: PolicyChange) -> PolicyChange:
    """Record ``change`` in the store's ``changes`` table (:func:`analytics.change.record.record_change`)
    and in the audit record, in words (``tidelens change add`` and the What-if page).

    Raises :class:`~analytics.errors.AccessDenied` for a visitor who may not (nothing is opened),
    :class:`~analytics.errors.ConfigError` for a change that is not valid.
    """
    require(who, "record_change")
    change.validate()
    with open_writer() as store:
        record_change(store, change)
        record(store, who, "change", "recorded", change.describe()[:500])
    return change


def save_workload_map(who: Identity, open_writer: OpenWriter, wmap: "WorkloadMap",
                      config_path: str | Path) -> tuple[str, str]:
    """Save ``wmap`` into ``tidelens.toml`` (its previous version kept as ``tidelens.toml.prev``)
    and record the map's digest before and after; ``(before, after)``. Admins only."""

    require(who, "change_map")
    before = map_digest(load_map(config_path))
    after = map_digest(wmap)
    if before == after:
        return before, after
    save_map(wmap, config_path)
    with open_writer() as store:
        record(store, who, "map", "saved", Path(config_path).name, map_before=before, map_after=after)
    return before, after
