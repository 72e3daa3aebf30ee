"""What a parser writes one source into (:class:`Sink`), what a load reports (:class:`LoadResult`),
and the checks every source passes on its way in: sample times inside the plausible window,
a bounded number of services, series keyed once by metric and sorted labels, content hashed,
and NaN or infinite values counted for the load's note (:meth:`Sink.note`), whichever door they
came in by: a file, a mapped table, a live pull or the rules' recorded series. They are stored
as given (Prometheus allows them, and a gauge's NaN is the exporter's), never silently.

:class:`analytics.store.Store` owns the tables and the transaction; this module owns the
staging a parser sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import duckdb
import numpy as np
import orjson
import polars as pl
import xxhash as _xxhash

from analytics.config import TIME_WINDOW_ENV, env_setting
from analytics.errors import ConfigError, IngestError
from analytics.limits import IngestLimits
from analytics.text import visible
from analytics.times import iso_utc, parse_time_ms

STAGE_SCHEMA = {"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64, "seq": pl.Int64}
SERIES_SCHEMA = {"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}
# One row per request of a request log (analytics.ingest.requests), as the requests table holds it.
REQUEST_SCHEMA = {"ts_ms": pl.Int64, "service": pl.Utf8, "latency_ms": pl.Float64, "ttft_ms": pl.Float64,
                  "error": pl.Boolean, "status": pl.Utf8, "tokens": pl.Float64, "pod": pl.Utf8,
                  "namespace": pl.Utf8}

# Samples outside this window are refused: one stray year-10000 timestamp would otherwise sit in
# the store and overflow or hang every reader. ``TIDELENS_TIME_WINDOW="FROM,TO"`` (ISO-8601 dates
# or times, UTC; TO may be ``now+Nd``) widens or narrows it; the default is 2000-01-01 .. now + 1 day.
PLAUSIBLE_FROM_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
_DAY_MS = 86_400_000


def plausible_window_ms(now_ms: int | None = None) -> tuple[int, int]:
    """The window of sample times a load accepts, UTC epoch ms (see ``TIME_WINDOW_ENV``).

    >>> import os
    >>> saved = os.environ.pop(TIME_WINDOW_ENV, None)
    >>> lo, hi = plausible_window_ms(now_ms=1_800_000_000_000)
    >>> lo, hi - 1_800_000_000_000
    (946684800000, 86400000)
    >>> os.environ[TIME_WINDOW_ENV] = "2020-01-01,now+2d"
    >>> plausible_window_ms(now_ms=1_800_000_000_000)
    (1577836800000, 1800172800000)
    >>> _ = os.environ.pop(TIME_WINDOW_ENV) if saved is None else os.environ.update({TIME_WINDOW_ENV: saved})
    """
    import time

    now = int(time.time() * 1000) if now_ms is None else now_ms
    text = env_setting(TIME_WINDOW_ENV)
    if not text:
        return PLAUSIBLE_FROM_MS, now + _DAY_MS

    try:
        lo, hi = (part for part in text.split(",", 1))
        return parse_time_ms(lo, now_ms=now), parse_time_ms(hi, now_ms=now)
    except (ValueError, ConfigError):
        raise ConfigError(f"{TIME_WINDOW_ENV}={text!r}: write FROM,TO as ISO-8601 times, e.g. "
                          "2000-01-01,now+1d") from None


def _describe_ms(ts_ms: int) -> str:
    """An epoch-ms time as ISO-8601 where a calendar can hold it, else its year."""

    return iso_utc(ts_ms // 1000 * 1000)


def implausible_time_message(ts_ms: int, window: tuple[int, int]) -> str:
    """Why a sample time is refused, with a hint when it reads right in another unit.

    >>> implausible_time_message(1_791_360_000, (946_684_800_000, 1_900_000_000_000))[:60]
    'sample time 1791360000 (1970-01-21T17:36:00Z) is outside the'
    """
    lo, hi = window
    hint = ""
    for factor, unit in ((1000, "seconds where milliseconds were expected"),
                         (1e-3, "milliseconds where seconds were expected (OpenMetrics and the "
                                "Prometheus API write seconds)"),
                         (1e-3 * 1e-3, "microseconds"), (1e-6 * 1e-3, "nanoseconds")):
        if lo <= ts_ms * factor <= hi:
            hint = f"; it reads as a plausible time in {unit}"
            break
    return (f"sample time {ts_ms} ({_describe_ms(ts_ms)}) is outside the plausible window "
            f"{_describe_ms(lo)} .. {_describe_ms(hi)}{hint}; fix the export, or set {TIME_WINDOW_ENV} "
            "to widen the window")


def too_many_series(source: str, limit: int, line: int | None = None, what: str = "label") -> IngestError:
    """The refusal of a source past :class:`~analytics.limits.IngestLimits`' ``max_series`` (the limit
    named, and the ``line`` of the first series past it where the reader knows it)."""
    return IngestError(source, f"more than {limit:,} series in one source: refused (a {what} that changes on "
                       "every line makes a new series each time); split the export, or raise "
                       "TIDELENS_MAX_SERIES_PER_SOURCE", line=line)


@contextmanager
def scanned_once(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> Iterator[None]:
    """``frame`` registered as ``name`` for one statement that reads it once, as an Arrow stream.

    Inside a transaction DuckDB keeps a dropped view until the commit, and a registered frame
    with it: a merge registering each batch of 2 million series held every batch (1.36 GB of
    DuckDB's 0.64); a stream's batches are freed as the statement reads them.
    """
    import pyarrow as pa  # as polars' own to_arrow does, on first use

    table = frame.to_arrow()
    reader = pa.RecordBatchReader.from_batches(table.schema, iter(table.to_batches()))
    del table
    con.register(name, reader)
    try:
        yield
    finally:
        con.unregister(name)


def _one_frame(frames: list[pl.DataFrame], schema: dict[str, Any]) -> pl.DataFrame:
    """``frames`` as one frame without copying their chunks (an empty one of ``schema`` for none)."""
    if not frames:
        return pl.DataFrame(schema=schema)
    return frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)


def series_key(metric: str, labels: dict[str, str]) -> str:
    """The identity of a series: metric and its labels, sorted, as compact JSON.

    >>> series_key("up", {"job": "a", "instance": "b"})
    '{"__name__":"up","instance":"b","job":"a"}'
    """
    items = {"__name__": metric}
    for k in sorted(labels):
        items[k] = labels[k]
    return orjson.dumps(items).decode()


class ContentHasher:
    """A streaming hash of a source's (decompressed) bytes: what makes a re-load a no-op.

    XXH3-128 (``xxhash``), written ``xxh3-128:<hex>``: ~0.1 CPU-s for a 1.5 GB archive against
    ~0.9 for SHA-256, which was a sixth of the whole load. Identity, not security, is what it is
    for. Older stores hold plain SHA-256 hex; the two never compare equal, so such a store merely
    re-loads a source, which changes no samples.
    """

    def __init__(self) -> None:
        self._h: Any = _xxhash.xxh3_128()

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def hexdigest(self) -> str:
        digest = self._h.hexdigest()
        return f"xxh3-128:{digest}"


def content_hash(data: bytes) -> str:
    """The content hash of a source's (decompressed) bytes (see :class:`ContentHasher`)."""
    h = ContentHasher()
    h.update(data)
    return h.hexdigest()


def check_plausible_times(ts_ms: pl.Series, source: str, locate: Callable[[int], dict[str, Any]] | None = None,
                          window: tuple[int, int] | None = None) -> None:
    """Raise :class:`IngestError` naming the first time outside the plausible window (nulls pass).

    ``locate(i)`` gives the ``line`` (or ``where``) of row ``i`` for the message.
    """
    lo, hi = window or plausible_window_ms()
    t_min, t_max = ts_ms.min(), ts_ms.max()
    if t_min is None or (t_min >= lo and t_max <= hi):
        return
    i = int(((ts_ms < lo) | (ts_ms > hi)).fill_null(False).arg_true()[0])
    raise IngestError(source, implausible_time_message(int(ts_ms[i]), (lo, hi)), **(locate(i) if locate else {}))


def check_service_count(services: int, source: str, column: str | None = None) -> None:
    """Refuse a request log with more services than :class:`~analytics.limits.IngestLimits` allows."""

    limit = IngestLimits.from_env().max_services
    if services > limit:
        which = f"column {column!r}" if column else "column"
        raise IngestError(source, f"more than {limit:,} services in one request log: refused (is the service "
                          f"{which} a per-request id?); map another column as the service, or raise "
                          "TIDELENS_MAX_SERVICES_PER_SOURCE")


class Sink:
    """Where a parser writes one source: series and samples keyed by a source-local ``skey``.

    A parser calls :meth:`add_series` with a frame ``(skey: Int64, metric: Utf8, labels: Utf8)``
    where ``labels`` is a JSON object of the raw labels (``__name__`` excluded), and
    :meth:`add_samples` with ``(skey: Int64, ts_ms: Int64, value: Float64)`` in file order.
    The same ``skey`` may be announced more than once (chunks): the first announcement wins.
    Later samples of the same series and timestamp win over earlier ones.

    Samples and series stay in their polars frames until :meth:`finish` registers them as
    ``stage_samples`` and ``stage_series`` for the merge to scan in place (a DuckDB temp table
    held 2 million staged series in 530 MB, their frames in about half of that).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, source: str = "<source>",
                 window: tuple[int, int] | None = None) -> None:

        self._con = con
        self.source = source
        self.window = window or plausible_window_ms()
        self.max_series = IngestLimits.from_env().max_series
        self.series_seen = 0
        self._seq = 0
        self.samples_seen = 0
        # True while every series' timestamps strictly increase in file order, which proves there
        # is nothing to collapse; checked per chunk in numpy or polars (10M samples: ~0.1-0.3 s vs
        # ~1.1 s as a window query over the staged samples).
        self.ordered = True
        self._last_ts: pl.DataFrame | None = None
        self._order_mode: str | None = None  # scrapes | runs | groups: which check the first frames fitted
        self._ts_max: int | None = None  # "scrapes": the last time seen, and the series seen at that time
        self._tail_skeys = np.empty(0, dtype=np.int64)
        self._max_skey = -1  # largest skey checked so far: frames of only larger skeys cannot overlap earlier ones
        self._pending: list[pl.DataFrame] = []  # samples, scanned in place by the merge
        self._series: list[pl.DataFrame] = []  # series (skey, metric, labels), likewise
        self.requests: list[pl.DataFrame] = []  # a request log's rows (REQUEST_SCHEMA), merged after its source
        self.final_is_view = False  # set by the merge: how stage_final was made, hence how to drop it
        self.nonfinite = 0  # NaN and infinite sample values staged, and where the first was
        self.first_nonfinite: str | None = None

    def _count_series(self, n: int) -> None:
        self.series_seen += n
        if self.series_seen > self.max_series:
            raise too_many_series(self.source, self.max_series)

    def add_series(self, frame: pl.DataFrame) -> None:
        self._count_series(frame.height)
        # A NUL never comes from an exporter; it cuts C strings short in tools downstream. Every
        # format passes here (the exposition parser refuses it earlier, with its line).
        nul = frame.filter(pl.col("labels").str.contains("\\u0000", literal=True)
                           | pl.col("metric").str.contains("\x00", literal=True))
        if nul.height:

            metric, labels = nul.row(0)[1:3]
            raise IngestError(self.source, f"series {visible(metric)} {visible(labels)[:200]} holds a NUL "
                              "byte in its name or a label, which no exporter writes: the file is damaged "
                              "or hostile")
        self._series.append(frame.select(
            pl.col("skey").cast(pl.Int64), pl.col("metric").cast(pl.Utf8), pl.col("labels").cast(pl.Utf8)))

    def add_samples(self, frame: pl.DataFrame, *,
                    locate: Callable[[int], dict[str, Any]] | None = None) -> None:
        """Stage samples (``skey, ts_ms, value``); refuse the source when a time is implausible.

        ``locate(i)`` gives the ``line`` (or ``where``) of the frame's row ``i``, for the message.
        """
        n = frame.height
        if n == 0:
            return
        check_plausible_times(frame["ts_ms"], self.source, locate, self.window)
        stage_samples_in = frame.select(
            pl.col("skey").cast(pl.Int64), pl.col("ts_ms").cast(pl.Int64),
            pl.col("value").cast(pl.Float64),
            (pl.int_range(0, n, dtype=pl.Int64) + self._seq).alias("seq"))
        self._seq += n
        self.samples_seen += n
        self._count_nonfinite(stage_samples_in["value"], locate)
        if self.ordered:
            self._check_order(stage_samples_in)
        self._pending.append(stage_samples_in)

    def _count_nonfinite(self, values: pl.Series, locate: Callable[[int], dict[str, Any]] | None) -> None:
        odd = (values.is_nan() | values.is_infinite()).fill_null(False)
        n = int(odd.sum())
        if n and not self.nonfinite and locate is not None:
            place = locate(int(odd.arg_true()[0]))
            self.first_nonfinite = f"line {place['line']}" if "line" in place else place.get("where")
        self.nonfinite += n

    def note(self) -> str | None:
        """What the load's note says of the staged values themselves (NaN and infinite ones), or None."""
        if not self.nonfinite:
            return None
        at = f", first at {self.first_nonfinite}" if self.first_nonfinite else ""
        return f"{self.nonfinite:,} NaN/Inf value(s) stored as the source gave them{at}"

    def add_requests(self, frame: pl.DataFrame, *,
                     locate: Callable[[int], dict[str, Any]] | None = None) -> None:
        """Stage a request log's rows (:data:`REQUEST_SCHEMA`); refuse implausible times, NUL
        bytes and more services than :func:`check_service_count` allows.

        ``locate(i)`` gives the ``line`` (or ``where``) of the frame's row ``i``, for the message.
        """
        if frame.height == 0:
            return
        # text columns may come as Categorical (a log's few services and pods, held once each)
        frame = frame.select(*(pl.col(c) if t == pl.Utf8 and frame.schema[c] == pl.Categorical else pl.col(c).cast(t)
                               for c, t in REQUEST_SCHEMA.items()))
        check_plausible_times(frame["ts_ms"], self.source, locate, self.window)
        for col in ("service", "pod", "namespace", "status"):
            values = frame[col].unique().drop_nulls().cast(pl.Utf8)
            bad = values.filter(values.str.contains("\x00", literal=True))
            if bad.len():
                i = int((frame[col].cast(pl.Utf8) == bad[0]).arg_true()[0])
                raise IngestError(self.source, f"column {col!r} holds a NUL byte, which no log writes: the file "
                                  "is damaged or hostile", **(locate(i) if locate else {}))
        check_service_count(pl.concat([f["service"].unique().cast(pl.Utf8)
                                       for f in (*self.requests, frame)]).n_unique(), self.source)
        self.requests.append(frame)

    def finish(self) -> None:
        """Expose the buffered samples and series to the merge as ``stage_samples`` and
        ``stage_series`` (the store calls this)."""
        self._con.register("stage_samples", _one_frame(self._pending, STAGE_SCHEMA))
        self._con.register("stage_series", self.staged_series())

    def staged_series(self) -> pl.DataFrame:
        """Every announced series, ``(skey, metric, labels)`` in the order they came (chunks, no copy)."""
        return _one_frame(self._series, SERIES_SCHEMA)

    def release(self) -> None:
        """Drop the buffered samples and series once merged (or rolled back)."""
        self._pending = []
        self._series = []
        self.requests = []
        for view in ("stage_samples", "stage_series", "stage_requests"):
            try:
                self._con.unregister(view)
            except duckdb.Error:
                pass

    def _check_order(self, frame: pl.DataFrame) -> None:
        # Three checks, cheapest first; "scrapes" keeps no per-series state, so once the first
        # frame chose it, it is the only one.
        if self._order_mode == "scrapes":
            self._check_order_scrapes(frame)
            return
        if self._check_order_runs(frame):
            self._order_mode = self._order_mode or "runs"
            return
        if self._order_mode is None and self._check_order_scrapes(frame):
            return
        self._order_mode = "groups"
        ts = pl.col("ts_ms")
        g = frame.group_by("skey").agg(first=ts.first(), last=ts.last(),
                                       ok=(ts.diff().fill_null(1) > 0).all())
        if not g["ok"].all():
            self.ordered = False
            return
        if self._last_ts is not None:
            seen = g.join(self._last_ts, on="skey", how="inner", suffix="_prev")
            if (seen["first"] <= seen["last_prev"]).any():
                self.ordered = False
                return
            self._last_ts = pl.concat([self._last_ts.join(g, on="skey", how="anti"),
                                       g.select("skey", "last")])
        else:
            self._last_ts = g.select("skey", "last")
        self._max_skey = max(self._max_skey, int(g["skey"].max()))

    def _check_order_scrapes(self, frame: pl.DataFrame) -> bool:
        """The check for scrape archives: time never goes back, and no series twice at one time.

        With timestamps non-decreasing in file order, "each series strictly increases" is "no
        (time, series) pair twice", counted with numpy per run of equal times (5M samples:
        ~0.1 CPU-s against ~0.7 for grouping by series). Returns False, deciding nothing, when
        the first frame is not of that shape; once chosen, a frame that breaks it ends the fast merge.
        """
        chosen = self._order_mode == "scrapes"
        ts = frame["ts_ms"].to_numpy()
        skey = frame["skey"].to_numpy()
        step = np.diff(ts)
        if (ts.dtype.kind != "i" or skey.dtype.kind != "i" or (self._ts_max is not None and ts[0] < self._ts_max)
                or (step < 0).any() or skey.min() < 0):
            if chosen:
                self.ordered = False
            return chosen
        run = np.concatenate(([0], np.cumsum(step != 0)))
        lo = int(skey.min())
        width = int(skey.max()) - lo + 1
        key = run * width + (skey - lo)
        if (int(run[-1]) + 1) * width <= 8 * len(key):
            twice = int(np.bincount(key).max()) > 1
        else:
            twice = pl.Series(key).n_unique() != len(key)
        if not twice and self._ts_max is not None and ts[0] == self._ts_max:
            twice = bool(np.isin(skey[run == 0], self._tail_skeys).any())
        if twice:
            self.ordered = False
            return True
        tail = skey[run == run[-1]]
        if self._ts_max is not None and ts[0] == ts[-1] == self._ts_max:
            tail = np.concatenate([self._tail_skeys, tail])
        self._ts_max, self._tail_skeys = int(ts[-1]), tail
        self._order_mode = "scrapes"
        return True

    def _check_order_runs(self, frame: pl.DataFrame) -> bool:
        """The check for frames holding each series as one run of new skeys (JSON, tabular): numpy, no grouping.

        Returns False (deciding nothing) when the frame is not of that shape.
        """
        skey = frame["skey"].to_numpy()
        if skey[0] <= self._max_skey or skey.dtype.kind != "i":
            return False
        step = np.diff(skey)
        if (step < 0).any():
            return False
        ts = frame["ts_ms"].to_numpy()
        same = step == 0
        if ts.dtype.kind != "i" or (np.diff(ts)[same] <= 0).any():
            self.ordered = False
            return True
        ends = np.append(np.flatnonzero(~same), len(skey) - 1)
        last = pl.DataFrame({"skey": skey[ends], "last": ts[ends]})
        self._last_ts = last if self._last_ts is None else pl.concat([self._last_ts, last])
        self._max_skey = int(skey[-1])
        return True


@dataclass
class LoadResult:
    """What happened to one source; the CLI's ``--json`` prints these fields."""

    name: str
    format: str
    status: str  # loaded | skipped | failed
    series: int = 0
    samples: int = 0
    first_ts_ms: int | None = None
    last_ts_ms: int | None = None
    duplicates: int = 0
    blanks: int = 0
    error: str | None = None
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "format": self.format, "series": self.series,
                "samples": self.samples, "status": self.status, "error": self.error,
                "duplicates": self.duplicates, "blanks": self.blanks,
                "first_ts_ms": self.first_ts_ms, "last_ts_ms": self.last_ts_ms, "note": self.note,
                "requests": int(self.extra.get("requests", 0))}


def _skipped(name: str, fmt: str) -> LoadResult:
    return LoadResult(name=name, format=fmt, status="skipped", note="same content already loaded")
