"""The audit record: every load, pull, column mapping and workload-map change made from the app
(and every ``tidelens ingest`` and ``pull``), with who, when and what (source names and content hashes, the map's digest before and after),
in the store's ``audit`` table.

Written only through :mod:`analytics.writes` (each write checks the role first, then records
itself; the commands use its ``recorded`` block);
read by the Data page and ``tidelens audit --db DB``. A load that changed nothing (the same file
again) is not a change and leaves no row.

>>> from analytics.store import Store
>>> from analytics.access import LOCAL_OPERATOR
>>> with Store(":memory:") as st:
...     record(st, LOCAL_OPERATOR, "map", "saved", "tidelens.toml", map_before="a", map_after="b")
...     audit_rows(st)["who"].to_list()
['local operator']
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from analytics.errors import bounded
from analytics.sql import audit as q
from analytics.times import iso_utc

if TYPE_CHECKING:
    from analytics.access import Identity
    from analytics.store import Store

# A store is a file anyone may have edited: a record whose sources column is not the JSON list
# Tidelens writes is shown as unreadable (with this much of its text), never read as one.
UNREADABLE_CHARS = 120
AUDIT_COLUMNS = ("at", "who", "role", "action", "outcome", "what", "sources", "map_before", "map_after")


def last_source_id(store: "Store") -> int:
    """The newest source's id: what a write's :func:`sources_since` counts from."""
    return int(store.con.execute(q.SOURCES_MAX_ID).fetchall()[0][0])


def sources_since(store: "Store", after: int) -> list[dict[str, str]]:
    """The sources written after id ``after``: name, content hash and status (loaded or failed)."""
    rows = store.con.execute(q.SOURCES_SINCE, {"after": after}).fetchall()
    return [{"name": n, "hash": h, "status": s} for n, h, s in rows]


def record(store: "Store", who: "Identity", action: str, outcome: str, what: str, *,
           sources: list[dict[str, str]] | None = None, map_before: str | None = None,
           map_after: str | None = None, at_ms: int | None = None) -> None:
    """Add one row to the store's audit record (creating the table in a store from before it)."""
    store.con.execute(q.AUDIT_CREATE).fetchall()  # DuckDB 2: every result is fetched before the next
    store.con.execute(q.AUDIT_INSERT, {
        "at_ms": int(time.time() * 1000) if at_ms is None else at_ms, "who": who.who,
        "role": who.role or "none", "action": action, "outcome": outcome, "what": what,
        "sources": orjson.dumps(sources or []).decode(), "map_before": map_before,
        "map_after": map_after}).fetchall()


def has_audit(store: "Store") -> bool:
    return bool(store.con.execute(q.HAS_AUDIT_TABLE).fetchall()[0][0])


def audit_rows(store: "Store", limit: int = 1000) -> pl.DataFrame:
    """The newest ``limit`` rows of the record, newest first (an empty frame for a store without
    one); ``sources`` as "name (hash)" text, one per source."""
    if not has_audit(store):
        return pl.DataFrame(schema={c: pl.Utf8 for c in AUDIT_COLUMNS})
    frame = store.query(q.AUDIT_LIST, {"limit": limit})
    return frame.with_columns(pl.col("sources").map_elements(_sources_text, return_dtype=pl.Utf8))


def audit_dicts(store: "Store", limit: int = 1000) -> list[dict[str, Any]]:
    """The record as JSON-ready dicts (``tidelens audit --json``): sources as a list, time as ISO;
    a row whose sources are not readable has ``sources: []`` and ``unreadable`` saying so."""
    if not has_audit(store):
        return []
    frame = store.query(q.AUDIT_LIST, {"limit": limit}).with_columns(pl.col("at").dt.epoch("ms"))
    rows = frame.to_dicts()  # epoch ms, not datetimes: any year the column holds prints
    for r in rows:
        r["at"] = iso_utc(int(r["at"]))
        sources = read_sources(r["sources"])
        if sources is None:
            r["unreadable"] = _unreadable(r["sources"])
        r["sources"] = sources or []
    return rows


def read_sources(raw: str | None) -> list[dict[str, str]] | None:
    """The sources column as the list of ``{name, hash, status}`` Tidelens writes, or ``None``
    when it holds anything else (not JSON, another shape, other types).

    >>> read_sources('[{"name": "a.prom", "hash": "ab", "status": "loaded"}]')[0]["name"], read_sources("{oops")
    ('a.prom', None)
    """
    try:
        value = orjson.loads(raw or "")
    except orjson.JSONDecodeError:
        return None
    keys = ("name", "hash", "status")
    if not isinstance(value, list) or not all(
            isinstance(v, dict) and all(isinstance(v.get(k), str) for k in keys) for v in value):
        return None
    return [{k: v[k] for k in keys} for v in value]


def _unreadable(raw: str | None) -> str:
    return (f"sources unreadable (not the JSON list of name, hash and status Tidelens writes): "
            f"{bounded(repr(raw), UNREADABLE_CHARS)}")


def _sources_text(raw: str) -> str:
    sources = read_sources(raw)
    if sources is None:
        return _unreadable(raw)
    return ", ".join(f"{s['name']} ({s['status']}, {s['hash'][:12]})" for s in sources)
