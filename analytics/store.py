"""The store: one DuckDB file holding every loaded source, its series and its samples (the
staging a parser writes into is :mod:`analytics.sink`; opening a file safely, :mod:`analytics.store_file`).

Series are identified once (metric + sorted labels) with normalised label columns beside the
raw labels; samples are ``(series_id, ts_ms UTC, value)``. Loading a source is atomic (a
failure half-way leaves nothing of it), idempotent (the same content again is ``skipped``),
and duplicate ``(series, timestamp)`` pairs collapse to one, the last loaded winning.

Parsers never touch tables: they write to a :class:`Sink`, and :meth:`Store.load` owns the
transaction.

>>> from analytics.store import Store
>>> with Store(":memory:") as st:
...     st.totals()["series"]
0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import duckdb
import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.labels import NORMALISED_COLUMNS, normalise_labels
from analytics.signals import canonical_metric

# The staging a parser writes into lives in analytics.sink; its names stay importable from here.
from analytics.sink import (  # noqa: F401
    PLAUSIBLE_FROM_MS,
    REQUEST_SCHEMA,
    STAGE_SCHEMA,
    TIME_WINDOW_ENV,
    ContentHasher,
    LoadResult,
    Sink,
    _skipped,
    check_plausible_times,
    check_service_count,
    content_hash,
    implausible_time_message,
    plausible_window_ms,
    scanned_once,
    series_key,
)
from analytics.sql import requests as rq
from analytics.sql import store as q
from analytics.sql import timeline as tq
from analytics.store_file import DEFAULT_LOCK_WAIT_S, LOCK_WAIT_ENV, connect_store, lock_wait_s  # noqa: F401

DEFAULT_DB = Path(__file__).resolve().parent.parent / "data" / "tidelens.duckdb"
# Series keyed per pass of a merge: bounds the Python objects one pass holds (~40 MB; 100,000 a
# pass held 200 MB more at 2 million series).
SERIES_BATCH = 25_000
class Store:
    """A Tidelens store on one DuckDB file (or ``":memory:"``).

    Parameters
    ----------
    path:
        The DuckDB file; created with its folder if missing.
    read_only:
        Open without write access (several readers may share a file).
    memory_limit:
        DuckDB's memory limit (e.g. ``"4GB"``), beyond which it spills to disk; DuckDB's default
        (80% of RAM) when None. Fixed for the connection's life (its configuration is locked).

    Raises
    ------
    StoreFileError
        ``path`` is not a DuckDB file Tidelens wrote (:mod:`analytics.store_file`: a pipe, an
        empty file, another format, a store holding views or macros).
    StoreBusyError
        Another program holds the file's lock.
    """

    def __init__(self, path: str | Path = DEFAULT_DB, *, read_only: bool = False,
                 memory_limit: str | None = None) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # Data only: external access off and locked, the catalog checked before any read.
        self.con = connect_store(self.path, read_only=read_only, memory_limit=memory_limit)
        if not read_only:
            self.con.execute(q.SCHEMA)

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loading --------------------------------------------------------------------------
    def has_source(self, hash_: str) -> bool:
        return bool(self.con.execute(q.SOURCE_BY_HASH, {"hash": hash_}).fetchall())

    def load(self, name: str, fmt: str, hash_: str | Callable[[], str],
             parse: Callable[[Sink], str | None]) -> LoadResult:
        """Load one source atomically.

        ``parse(sink)`` writes the source's series and samples to ``sink`` and may return a
        note (e.g. which timestamp it used). Any exception rolls everything back, records the
        failure in ``sources`` and is re-raised.

        ``hash_`` is the content hash, or a function returning it once ``parse`` has run: a
        streaming parser then hashes the bytes it reads instead of reading the source twice,
        and "already loaded" is decided after parsing, before anything is merged (a re-load
        costs a parse but still changes nothing).
        """
        if isinstance(hash_, str) and self.has_source(hash_):
            return _skipped(name, fmt)
        con = self.con
        con.execute("BEGIN TRANSACTION")
        sink = Sink(con, name)
        try:
            note = parse(sink)
            sink.finish()
            if not isinstance(hash_, str):
                hash_ = hash_()
                if self.has_source(hash_):
                    con.execute("ROLLBACK")
                    return _skipped(name, fmt)
            result = self._merge(name, fmt, hash_, "; ".join(n for n in (note, sink.note()) if n) or None, sink)
            con.execute(q.STAGE_FINAL_DROP_VIEW if sink.final_is_view else q.STAGE_FINAL_DROP_TABLE)
            con.execute(q.STAGE_DROP)
            con.execute("COMMIT")
            return result
        except BaseException as exc:
            con.execute("ROLLBACK")
            if not isinstance(hash_, str):
                try:
                    hash_ = hash_()
                except Exception:  # the source itself is unreadable: still record the failure
                    hash_ = f"unreadable:{name}"
            self._record_failure(name, fmt, hash_, exc)
            raise
        finally:
            sink.release()

    def _record_failure(self, name: str, fmt: str, hash_: str, exc: BaseException) -> None:
        try:
            self.con.execute(q.SOURCE_DELETE_FAILED, {"hash": hash_})
            self._row(q.SOURCE_INSERT, {
                "name": name, "format": fmt, "hash": hash_, "series": 0, "samples": 0,
                "first_ts_ms": None, "last_ts_ms": None, "status": "failed", "error": str(exc),
                "duplicates": 0, "blanks": 0, "note": None})
        except duckdb.Error:
            pass  # recording the failure must never hide it

    def _merge(self, name: str, fmt: str, hash_: str, note: str | None, sink: Sink) -> LoadResult:
        con = self.con
        old_max_id = self._row(q.SERIES_MAX_ID)[0]
        self._map_series(sink.staged_series(), old_max_id, name)
        injective = self._row(q.STAGE_MAP_INJECTIVE)[0]
        fast = bool(injective and sink.ordered)
        con.execute(q.STAGE_FINAL_FAST if fast else q.STAGE_FINAL_DEDUP)
        sink.final_is_view = fast
        samples, n_series, first, last, conflicts = self._row(q.STAGE_SUMMARY)
        # On the fast path every staged sample not in stage_final was a blank sentinel.
        blanks = sink.samples_seen - samples if fast else self._row(q.STAGE_BLANKS)[0]
        changed = 0
        if old_max_id > 0 and samples and self._row(q.STAGE_TOUCHES_OLD, {"old_max_id": old_max_id})[0]:
            changed, overlapping = self._row(q.EXISTING_CONFLICTS, {"old_max_id": old_max_id})
            if overlapping:
                con.execute(q.DELETE_OVERLAP, {"old_max_id": old_max_id})
        con.execute(q.SAMPLES_INSERT)
        duplicates = int(conflicts) + int(changed)
        con.execute(q.SOURCE_DELETE_FAILED, {"hash": hash_})
        n_requests = 0
        if sink.requests:
            stage_requests = pl.concat(sink.requests, rechunk=False)
            con.register("stage_requests", stage_requests)
            n_requests, n_services, r_first, r_last = self._row(rq.STAGE_REQUESTS_SUMMARY)
            first = r_first if first is None else min(first, r_first)
            last = r_last if last is None else max(last, r_last)
            what = f"{n_requests:,} requests of {n_services} service{'s' if n_services != 1 else ''}"
            note = f"{what}; {note}" if note else what
        source_id = self._row(q.SOURCE_INSERT, {
            "name": name, "format": fmt, "hash": hash_, "series": n_series, "samples": samples,
            "first_ts_ms": first, "last_ts_ms": last, "status": "loaded", "error": None,
            "duplicates": duplicates, "blanks": blanks, "note": note})[0]
        if sink.requests:
            con.execute(rq.REQUESTS_INSERT, {"source_id": source_id})
        return LoadResult(name=name, format=fmt, status="loaded", series=int(n_series),
                          samples=int(samples), first_ts_ms=first, last_ts_ms=last,
                          duplicates=duplicates, blanks=int(blanks), note=note,
                          extra={"requests": int(n_requests)} if sink.requests else {})

    def _map_series(self, staged: pl.DataFrame, old_max_id: int, name: str) -> None:
        """``stage_map`` (``skey -> series_id``) of every staged series: a known series keeps its id,
        a new one is inserted after ``old_max_id``. :data:`SERIES_BATCH` series at a time, so that a
        source of 2 million series never holds them all as Python objects (2.2 GB before)."""
        con = self.con
        con.execute(q.STAGE_MAP_CREATE)
        if staged["skey"].is_duplicated().any():  # announced twice (in chunks): the first wins
            staged = staged.unique("skey", keep="first", maintain_order=True)
        max_id = old_max_id
        for lo in range(0, staged.height, SERIES_BATCH):
            map_rows = self._assign_series_ids(staged.slice(lo, SERIES_BATCH), max_id, name)
            max_id += int(map_rows["new"].sum())
            with scanned_once(con, "stage_map_in", map_rows.select("skey", "series_id")):
                con.execute(q.STAGE_MAP_INSERT)

    def _assign_series_ids(self, staged: pl.DataFrame, max_id: int, name: str) -> pl.DataFrame:
        """Key each staged series, reuse ids of known series (those of earlier batches too), insert
        the new ones after ``max_id``; ``(skey, series_id, new)`` of each, ``new`` once per inserted id."""
        rows = []
        for skey, metric, labels_json in staged.iter_rows():
            try:
                labels = orjson.loads(labels_json) if labels_json else {}
            except orjson.JSONDecodeError as exc:  # a parser bug, not user input
                raise IngestError(name, f"internal: bad label JSON for series {metric}: {exc}") from exc
            labels.pop("__name__", None)
            metric_c = canonical_metric(metric)
            norm = normalise_labels(labels)
            rows.append({"skey": skey, "key": series_key(metric_c, labels), "metric": metric_c,
                         **norm, "labels": orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()})
        schema = {"skey": pl.Int64, "key": pl.Utf8, "metric": pl.Utf8,
                  **{c: pl.Utf8 for c in NORMALISED_COLUMNS}, "labels": pl.Utf8}
        frame = pl.DataFrame(rows, schema=schema)
        with scanned_once(self.con, "stage_map_in", frame.select("key").unique()):
            known = self.con.sql(q.SERIES_IDS_BY_KEY).pl()
        known = known.rename({"id": "series_id"}) if known.height else pl.DataFrame(
            schema={"key": pl.Utf8, "series_id": pl.Int64})
        new = frame.unique("key", keep="first", maintain_order=True).join(known, on="key", how="anti")
        new = new.with_columns((pl.int_range(0, new.height, dtype=pl.Int64) + max_id + 1).alias("id"))
        if new.height:
            with scanned_once(self.con, "series_new_in", new.drop("skey")):
                self.con.execute(q.SERIES_INSERT)
        ids = pl.concat([known.select("key", pl.col("series_id").cast(pl.Int64), new=pl.lit(False)),
                         new.select("key", pl.col("id").alias("series_id"), new=pl.lit(True))])
        mapped = frame.select("skey", "key").join(ids, on="key", maintain_order="left")
        # an id counts as new on its first skey only (two skeys may name one new series)
        return mapped.select("skey", "series_id", new=pl.col("new") & pl.col("series_id").is_first_distinct())

    # -- reading --------------------------------------------------------------------------
    def sources(self) -> pl.DataFrame:
        return self.query(q.SOURCES_LIST)

    def series(self, metric: str | None = None) -> pl.DataFrame:
        return self.query(q.SERIES_LIST, {"metric": metric})

    def metrics(self) -> pl.DataFrame:
        return self.query(q.METRICS_INVENTORY)

    def totals(self) -> dict[str, Any]:
        """Series, samples, loaded sources, and the span of the samples and requests a view can show."""
        out = dict(zip(("series", "samples", "sources"), self._row(q.TOTALS)))
        # the span inside the plausible window (plausible_window_ms): what a view can show
        out["first_ts_ms"], out["last_ts_ms"] = self.data_range_ms(plausible_window_ms())
        out["requests"] = self._row(rq.REQUESTS_COUNT)[0] if self.has_requests() else 0
        return out

    def has_requests(self) -> bool:
        """Whether the store has a ``requests`` table (a read-only store from before may not)."""
        return bool(self._row(rq.HAS_REQUESTS_TABLE)[0])

    def data_range_ms(self, window: tuple[int, int]) -> tuple[int | None, int | None]:
        """First and last time of any sample or request inside ``window`` (``lo_ms, hi_ms``)."""

        params = {"lo_ms": window[0], "hi_ms": window[1]}
        spans = [self._row(tq.DATA_RANGE, params)]
        if self.has_requests():
            spans.append(self._row(rq.REQUESTS_RANGE, params))
        firsts = [s[0] for s in spans if s and s[0] is not None]
        lasts = [s[1] for s in spans if s and s[1] is not None]
        return (min(firsts) if firsts else None, max(lasts) if lasts else None)

    def _row(self, sql: str, params: dict[str, Any] | None = None) -> tuple:
        # DuckDB 2.0 refuses new work while an execute() result is unfetched: fetch it all.
        rows = self.con.execute(sql, params or {}).fetchall()
        return rows[0] if rows else ()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """Run one of the named statements of ``analytics.sql`` and return a polars frame."""
        # DuckDB 2.0: polars output lives on relations (con.sql), not on execute() results.
        return self.con.sql(sql, params=params or None).pl()
