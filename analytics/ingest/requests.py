"""Per-request logs: one row per request (a gateway's or an access log, vLLM's request log) as
CSV, JSON lines or Parquet, into the store's ``requests`` table.

Which column is what comes from the header (:func:`detect_request_columns`, names real tools
write: nginx ``request_time`` in seconds, Envoy ``duration`` in ms, ``latency_ms``, ``ttft_s``,
...) or from a column mapping's ``[requests]`` table (:mod:`analytics.ingest.mapping`). A
latency column must say its unit (a ``_ms``/``_s``/``_us`` suffix, or a tool's documented
field); a bare ``latency`` is refused rather than guessed.

A request is an error when its HTTP status is 5xx or 429, or when the log's own ``error``,
``status`` or ``success`` column says so in words or codes (:mod:`analytics.ingest.request_status`;
a mapping's ``success_values`` names the success values itself). A success value read as neither,
an empty cell included, counts as failed and is said in the note, as is a log whose every request
reads as failed.

A request is counted once: rows the store already holds (the same log under another name, two
exports that overlap) are skipped and counted in the note, matched on every column (the store
keeps no request id), and rows repeating a ``request_id`` within a log likewise. A latency past
``TIDELENS_MAX_LATENCY_S`` (a day) is refused as a wrong unit or a broken log; a NaN one is kept
as missing and said in the note.

>>> cols = detect_request_columns(["timestamp", "service", "latency_ms", "status"])
>>> (cols.time, cols.latency, cols.latency_unit, cols.service, cols.status)
('timestamp', 'latency_ms', 'ms', 'service', 'status')
>>> detect_request_columns(["timestamp", "metric", "value"]) is None
True
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import polars as pl

from analytics.errors import ConfigError, IngestError
from analytics.ingest.request_status import by_value, error_flag, status_error, success_failed
from analytics.ingest.sources import csv_header
from analytics.limits import IngestLimits
from analytics.sql import requests as rq
from analytics.store import Sink, check_service_count
from analytics.times import EPOCH_UNIT_MS, epoch_unit

UNITS_MS: dict[str, float] = {u: EPOCH_UNIT_MS[u] for u in ("s", "ms", "us")}  # a latency's units
TIME_UNITS = ("s", "ms", "us", "ns", "iso", "clf", "auto")
# nginx's $time_local (common log format): 02/Dec/2026:10:00:00 +0000
CLF_FORMAT = "%d/%b/%Y:%H:%M:%S %z"

_TIME_NAMES = ("timestamp", "time", "ts", "@timestamp", "start_time", "end_time", "arrival_time",
               "finish_time", "finished_at", "completed_at", "time_local", "time_iso8601", "datetime",
               "created_at", "request_time_utc")
_UNIT_SUFFIX = {"ms": "ms", "milliseconds": "ms", "millis": "ms", "s": "s", "sec": "s", "secs": "s",
                "seconds": "s", "us": "us", "microseconds": "us", "micros": "us"}
_LATENCY = re.compile(r"^(?:(?:e2e|request|response|total|upstream|end_to_end)_)?"
                      r"(?:latency|duration|response_time|request_time|elapsed|e2e|e2e_latency|request_latency)"
                      r"(?:_(?P<unit>ms|milliseconds|millis|s|sec|secs|seconds|us|microseconds|micros))?$")
_TTFT = re.compile(r"^(?:ttft|time_to_first_token|first_token_latency|first_token_time)"
                   r"(?:_(?P<unit>ms|milliseconds|millis|s|sec|secs|seconds|us|microseconds|micros))?$")
# fields whose unit their tool documents: nginx's $request_time / $upstream_response_time (s),
# Envoy's %DURATION% (ms)
_TOOL_UNITS = {"request_time": "s", "upstream_response_time": "s", "duration": "ms"}
_SERVICE_NAMES = ("service", "service_name", "model", "model_name", "served_model_name", "upstream_cluster",
                  "upstream", "app", "deployment", "backend", "route")
_STATUS_NAMES = ("status", "status_code", "http_status", "response_code", "code")
_ERROR_NAMES = ("error", "is_error", "failed")
_SUCCESS_NAMES = ("success", "ok", "succeeded")
_TOKEN_NAMES = ("output_tokens", "completion_tokens", "generated_tokens", "num_generated_tokens", "tokens",
                "total_tokens")
_POD_NAMES = ("pod", "pod_name", "kubernetes_pod_name", "exported_pod")
_NAMESPACE_NAMES = ("namespace", "kube_namespace", "kubernetes_namespace", "exported_namespace")
_ID_NAMES = ("request_id", "requestid", "req_id", "x_request_id", "x-request-id", "trace_id")


@dataclass(frozen=True)
class RequestColumns:
    """Which column of a request log is what.

    ``time_unit``: ``s | ms | us | ns`` (epoch), ``iso`` (ISO-8601; ``time_zone`` for times
    without an offset), ``clf`` (nginx ``$time_local``) or ``auto`` (from the first values).
    ``latency_unit`` / ``ttft_unit``: ``s | ms | us``. The service is a column (``service``) or
    a constant (``service_name``; default the file's name).
    """

    time: str
    latency: str | None = None
    latency_unit: str = "ms"
    ttft: str | None = None
    ttft_unit: str = "ms"
    service: str | None = None
    service_name: str | None = None
    time_unit: str = "auto"
    time_zone: str = "UTC"
    status: str | None = None
    error: str | None = None
    success: str | None = None
    tokens: str | None = None
    pod: str | None = None
    namespace: str | None = None
    request_id: str | None = None  # rows repeating an id are one request logged twice
    success_values: tuple[str, ...] | None = None  # the success column's values meaning success (any case)

    def check(self, where: str) -> None:
        if not self.time:
            raise ConfigError(f"{where}: a request log needs its time column ([time] column)")
        if self.latency is None and self.ttft is None:
            raise ConfigError(f"{where}: [requests] needs latency = \"<column>\" (or ttft = \"<column>\")")
        for what, unit in (("latency_unit", self.latency_unit), ("ttft_unit", self.ttft_unit)):
            if unit not in UNITS_MS:
                raise ConfigError(f"{where}: [requests] {what} {unit!r}: one of s, ms, us")
        if self.time_unit not in TIME_UNITS:
            raise ConfigError(f"{where}: [time] unit {self.time_unit!r}: one of {', '.join(TIME_UNITS)}")
        if self.service is not None and self.service_name is not None:
            raise ConfigError(f"{where}: [requests] takes service (a column) or service_name (a constant), not both")
        if self.success_values is not None and self.success is None:
            raise ConfigError(f"{where}: [requests] success_values needs success = \"<column>\" (the column "
                              "they are values of)")
        if self.success_values is not None and not any(v.strip() for v in self.success_values):
            raise ConfigError(f"{where}: [requests] success_values is empty; write success_values = [\"SUCCEED\"]")

    def columns(self) -> list[str]:
        """The table's columns this reads, in a stable order."""
        cols = [self.time, self.latency, self.ttft, self.service, self.status, self.error, self.success,
                self.tokens, self.pod, self.namespace, self.request_id]
        return list(dict.fromkeys(c for c in cols if c))

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items() if v is not None}


def _first(cols: list[str], names: tuple[str, ...]) -> str | None:
    low = {c.lower(): c for c in reversed(cols)}
    return next((low[n] for n in names if n in low), None)


def _unit_of(col: str, pattern: re.Pattern[str]) -> str | None:
    m = pattern.match(col.lower())
    if not m:
        return None
    if m.group("unit"):
        return _UNIT_SUFFIX[m.group("unit")]
    return _TOOL_UNITS.get(col.lower())


def unitless_latency(cols: list[str]) -> str | None:
    """A latency-like column whose unit its name does not say (``latency``), or None.

    >>> unitless_latency(["ts", "latency", "service"]), unitless_latency(["ts", "latency_ms"])
    ('latency', None)
    """
    for c in cols:
        if (_LATENCY.match(c.lower()) or _TTFT.match(c.lower())) and _unit_of(c, _LATENCY) is None \
                and _unit_of(c, _TTFT) is None:
            return c
    return None


def detect_request_columns(cols: list[str]) -> RequestColumns | None:
    """The request-log reading of a header, or None when it is no request log.

    A request log has a time column and a latency (or time-to-first-token) column whose unit is
    known; the other roles are optional (the service defaults to the file's name).
    """
    time = _first(cols, _TIME_NAMES)
    latency = next((c for c in cols if _unit_of(c, _LATENCY)), None)
    ttft = next((c for c in cols if _unit_of(c, _TTFT)), None)
    if time is None or (latency is None and ttft is None):
        return None
    return RequestColumns(
        time=time, latency=latency, latency_unit=_unit_of(latency, _LATENCY) or "ms" if latency else "ms",
        ttft=ttft, ttft_unit=_unit_of(ttft, _TTFT) or "ms" if ttft else "ms",
        service=_first(cols, _SERVICE_NAMES), status=_first(cols, _STATUS_NAMES),
        error=_first(cols, _ERROR_NAMES), success=_first(cols, _SUCCESS_NAMES), tokens=_first(cols, _TOKEN_NAMES),
        pod=_first(cols, _POD_NAMES), namespace=_first(cols, _NAMESPACE_NAMES), request_id=_first(cols, _ID_NAMES))


def jsonl_keys(head: bytes) -> list[str] | None:
    """The keys of the first line of JSON lines (None unless it is a flat JSON object)."""
    import orjson

    first = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    return list(obj) if isinstance(obj, dict) else None


# -- reading -------------------------------------------------------------------------------
def _container(data: bytes) -> str:
    if data[:4] == b"PAR1":
        return "parquet"
    return "jsonl" if data.lstrip()[:1] == b"{" else "csv"


def _read_text_columns(data: bytes, source: str, kind: str, cols: list[str]) -> pl.DataFrame:
    """Every needed column as text: the slow, exact path that finds a bad row's line."""
    try:
        if kind == "csv":
            return pl.read_csv(io.BytesIO(data), columns=cols, infer_schema=False)
        if kind == "jsonl":
            import orjson

            rows = []
            for i, line in enumerate(data.split(b"\n")):
                if not line.strip():
                    continue
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise IngestError(source, f"not a JSON object ({exc})", line=i + 1) from None
                if not isinstance(obj, dict):
                    raise IngestError(source, "each line must be a JSON object", line=i + 1)
                rows.append({c: None if obj.get(c) is None else str(obj[c]).lower()
                             if isinstance(obj.get(c), bool) else str(obj[c]) for c in cols})
            return pl.DataFrame(rows, schema={c: pl.Utf8 for c in cols})
        return pl.read_parquet(io.BytesIO(data), columns=cols).select(pl.all().cast(pl.Utf8))
    except pl.exceptions.PolarsError as exc:
        raise IngestError(source, f"not a readable {kind.upper()} request log ({exc})") from None


def _read_typed(data: bytes, kind: str, rc: RequestColumns) -> pl.DataFrame:
    """The fast path: numbers read as numbers (raises PolarsError on a bad value)."""
    cols = rc.columns()
    numeric = [c for c in (rc.latency, rc.ttft, rc.tokens) if c]
    if kind == "csv":
        # strings as Categorical (a log repeats its services, pods and statuses: 10M rows of them as
        # text were half the load's peak memory); an epoch time as a number
        overrides: dict[str, Any] = {c: pl.Categorical for c in cols if c not in numeric}
        overrides.update({c: pl.Float64 for c in numeric})
        head = pl.read_csv(io.BytesIO(data), columns=[rc.time], n_rows=50, infer_schema=False)[rc.time]
        if rc.time_unit in ("s", "ms", "us", "ns", "auto") and head.drop_nulls().len() \
                and head.cast(pl.Float64, strict=False).null_count() == head.null_count():
            overrides[rc.time] = pl.Float64
        else:
            overrides[rc.time] = pl.Utf8
        return pl.read_csv(io.BytesIO(data), columns=cols, schema_overrides=overrides)
    if kind == "jsonl":
        frame = pl.read_ndjson(io.BytesIO(data), infer_schema_length=1000)
    else:
        frame = pl.read_parquet(io.BytesIO(data), columns=cols)
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        frame = frame.with_columns(*(pl.lit(None, dtype=pl.Utf8).alias(c) for c in missing))
    return frame.select(*(pl.col(c).cast(pl.Float64, strict=True) if c in numeric
                          else pl.col(c).cast(pl.Utf8) for c in cols))


def _bad_row(frame: pl.DataFrame, mask: pl.Series, column: str, what: str, source: str,
             locate: Callable[[int], dict[str, Any]]) -> None:
    rows = mask.fill_null(False).arg_true()
    if rows.len():
        i = int(rows[0])
        raise IngestError(source, f"column {column!r}: {frame[column][i]!r} is not {what}", **locate(i))


def _times_ms(raw: pl.Series, rc: RequestColumns, source: str, frame: pl.DataFrame,
              locate: Callable[[int], dict[str, Any]]) -> pl.Series:
    unit = rc.time_unit
    if unit == "auto":
        sample = raw.drop_nulls().head(50).cast(pl.Utf8).str.strip_chars()
        if sample.len() and sample.cast(pl.Float64, strict=False).null_count() == 0:
            unit = epoch_unit(float(sample.cast(pl.Float64)[0]))
        elif sample.len() and sample.str.to_datetime(CLF_FORMAT, strict=False).null_count() == 0:
            unit = "clf"
        else:
            unit = "iso"
    if unit in ("s", "ms", "us", "ns"):
        num = raw.cast(pl.Float64, strict=False) if raw.dtype != pl.Float64 else raw
        _bad_row(frame, num.is_null() & raw.is_not_null(), rc.time, f"a number of {unit} since the epoch",
                 source, locate)
        return (num * EPOCH_UNIT_MS[unit]).round(0).cast(pl.Int64)
    text = raw.cast(pl.Utf8).str.strip_chars()
    if unit == "clf":
        parsed = text.str.to_datetime(CLF_FORMAT, strict=False, time_unit="ms")
        what = "a time like 02/Dec/2026:10:00:00 +0000"
    else:
        parsed = text.str.to_datetime(strict=False, time_unit="ms", time_zone=rc.time_zone, ambiguous="earliest")
        what = "an ISO-8601 time"
    _bad_row(frame, parsed.is_null() & text.is_not_null() & (text != ""), rc.time, what, source, locate)
    if parsed.dtype.time_zone is None:  # type: ignore[union-attr]
        parsed = parsed.dt.replace_time_zone(rc.time_zone, ambiguous="earliest")
    return parsed.dt.convert_time_zone("UTC").dt.epoch("ms")


def read_requests(data: bytes, source: str, rc: RequestColumns) -> tuple[pl.DataFrame, Callable[[int], dict]]:
    """The log's rows as :data:`~analytics.store.REQUEST_SCHEMA` and a row -> line locator.

    Raises
    ------
    IngestError
        A named column the log lacks, a time that does not parse, a latency that is not a
        non-negative number: with the file, the line (JSON lines, CSV) or row (Parquet) and column.
    """
    kind = _container(data)
    locate: Callable[[int], dict[str, Any]] = (
        (lambda i: {"where": f"row {i + 1}"}) if kind == "parquet"
        else (lambda i: {"line": i + 2}) if kind == "csv" else (lambda i: {"line": i + 1}))
    header = _header(data, kind, source)

    limits = IngestLimits.from_env()
    if len(header) > limits.max_columns:
        raise IngestError(source, f"{len(header):,} columns, more than {limits.max_columns:,} in one table: refused "
                          "before reading the rows; raise TIDELENS_MAX_COLUMNS if it is real",
                          **({"line": 1} if kind == "csv" else {}))
    missing = [c for c in rc.columns() if c not in header]
    if missing:
        raise IngestError(source, f"the request log has no column {', '.join(map(repr, missing))}; its columns: "
                          f"{', '.join(header)[:300]}", **({"line": 1} if kind == "csv" else {}))
    numeric = [c for c in (rc.latency, rc.ttft, rc.tokens) if c]
    nan = None  # rows whose latency or time to first token is NaN: kept as missing, said in the note
    try:
        frame = _read_typed(data, kind, rc)
    except (pl.exceptions.PolarsError, ValueError):
        frame = _read_text_columns(data, source, kind, rc.columns())
        if kind == "jsonl":
            # blank lines are skipped by the reader: locate by the lines that hold objects
            lines = [i for i, ln in enumerate(data.split(b"\n")) if ln.strip()]
            locate = lambda i: {"line": lines[i] + 1}  # noqa: E731
    for c in numeric:
        raw = frame[c]
        if raw.dtype == pl.Float64:
            num = raw
        else:  # the text path: a value that is not a number is named
            num = raw.cast(pl.Float64, strict=False)
            text = raw.cast(pl.Utf8).str.strip_chars()
            _bad_row(frame, num.is_null() & raw.is_not_null() & (text != "") & (text != "-"), c, "a number",
                     source, locate)
        if c != rc.tokens:
            _bad_row(frame, num < 0, c, "a latency (it is negative)", source, locate)
            unit = rc.ttft_unit if c == rc.ttft else rc.latency_unit
            bound = limits.max_latency_s * 1000.0 / UNITS_MS[unit]
            # polars orders NaN above every number: a NaN is missing, not too long
            _bad_row(frame, (num > bound) & ~num.is_nan(), c,
                     f"a plausible latency in {unit}: more than {limits.max_latency_s:,} s "
                     "(is the unit right? raise TIDELENS_MAX_LATENCY_S if it is real)", source, locate)
        else:
            _bad_row(frame, num.is_infinite() | (num < 0), c, "a count of tokens", source, locate)
        if c != rc.tokens and num.is_nan().any():
            nan = num.is_nan().fill_null(False) if nan is None else nan | num.is_nan().fill_null(False)
        frame = frame.with_columns(num.fill_nan(None).alias(c))
    ts = _times_ms(frame[rc.time], rc, source, frame, locate)
    error = pl.repeat(False, frame.height, eager=True)
    unread = None  # a success value that reads as neither: counted failed, named in the note
    if rc.status:
        error = error | by_value(frame[rc.status], status_error)
    if rc.error:
        error = error | by_value(frame[rc.error], error_flag)
    if rc.success:
        # 1 failed, 0 succeeded, null: neither (a flag's null would read as "no error"); an empty
        # cell says neither too: a success column that does not say success is no success
        read = by_value(frame[rc.success], lambda v: None if (f := success_failed(v, rc.success_values)) is None
                         else int(f), pl.Int8)
        neither = read.is_null()
        unread = frame[rc.success].cast(pl.Utf8).fill_null("").zip_with(
            neither, pl.repeat(None, frame.height, dtype=pl.Utf8, eager=True))
        error = error | (read == 1).fill_null(False) | neither
    name = rc.service_name or Path(source).name.split(".")[0] or "requests"
    if rc.service:

        raw_service = frame[rc.service]
        # before mapping each distinct value: a per-request id would make that 10M Python calls
        check_service_count(raw_service.n_unique(), source, rc.service)
        service = by_value(raw_service, lambda v: v.strip() or None, pl.Utf8)
        _bad_row(frame, service.is_null(), rc.service, "a service name", source, locate)
    else:
        service = pl.repeat(name, frame.height, dtype=pl.Utf8, eager=True)

    def number(col: str | None, scale: float = 1.0) -> pl.Series:
        return (frame[col] * scale) if col else pl.repeat(None, frame.height, dtype=pl.Float64, eager=True)

    def text(col: str | None) -> pl.Series:
        if col is None:
            return pl.repeat(None, frame.height, dtype=pl.Utf8, eager=True)
        return frame[col] if frame[col].dtype == pl.Categorical else frame[col].cast(pl.Utf8)

    out = pl.DataFrame({"__row": pl.int_range(0, frame.height, eager=True), "ts_ms": ts, "service": service,
                        "latency_ms": number(rc.latency, UNITS_MS[rc.latency_unit]),
                        "ttft_ms": number(rc.ttft, UNITS_MS[rc.ttft_unit]), "error": error,
                        "status": text(rc.status), "tokens": number(rc.tokens), "pod": text(rc.pod),
                        "namespace": text(rc.namespace)})
    if rc.request_id:
        out = out.with_columns(frame[rc.request_id].cast(pl.Utf8).alias("__id"))
    if nan is not None:
        out = out.with_columns(nan.alias("__nan"))
    if unread is not None and unread.null_count() < unread.len():
        out = out.with_columns(unread.alias("__unread"))
    return out, locate


def _header(data: bytes, kind: str, source: str) -> list[str]:
    if kind == "parquet":
        try:
            return list(pl.read_parquet_schema(io.BytesIO(data)))
        except pl.exceptions.PolarsError as exc:
            raise IngestError(source, f"not a readable Parquet file ({exc})") from None
    if kind == "jsonl":
        keys = jsonl_keys(data)
        if keys is None:
            raise IngestError(source, "the first line is not a JSON object", line=1)
        return keys

    return csv_header(data)


def header_columns(data: bytes, source: str) -> list[str]:
    """The column names of a CSV, JSON-lines or Parquet log (what detection reads)."""
    return _header(data, _container(data), source)


def _known_rows(frame: pl.DataFrame, con: Any) -> pl.Series:
    """Which rows of ``frame`` the store's ``requests`` already holds (see REQUEST_ROWS_KNOWN)."""

    span = {"lo_ms": frame["ts_ms"].min(), "hi_ms": frame["ts_ms"].max()}
    none = pl.repeat(False, frame.height, eager=True)
    if not con.execute(rq.REQUESTS_IN_SPAN, span).fetchall()[0][0]:
        return none
    con.register("stage_requests_new", frame.with_row_index("row_id").select(
        "row_id", *(pl.col(c).cast(pl.Utf8) if frame.schema[c] == pl.Categorical else pl.col(c)
                    for c in ("ts_ms", "service", "latency_ms", "ttft_ms", "error", "status", "tokens", "pod",
                              "namespace"))))
    try:
        known = pl.Series([r[0] for r in con.execute(rq.REQUEST_ROWS_KNOWN, span).fetchall()], dtype=pl.Int64)
    finally:
        con.unregister("stage_requests_new")
    return none.scatter(known.cast(pl.Int64), True) if known.len() else none


def parse_requests(data: bytes, sink: Sink, source: str, rc: RequestColumns | None = None, *,
                   con: Any = None) -> str | None:
    """Load a request log into ``sink``; returns the load's note.

    ``rc``: which column is what; default :func:`detect_request_columns` of the header.
    ``con``: the store's connection, when given the rows the store already holds are skipped and
    counted in the note (the same requests loaded under another name, or two overlapping exports,
    counted once: 1,999,999 rows for 1,000,000 requests before). Rows repeating a request id
    within the log are skipped the same way.
    """
    if rc is None:
        cols = header_columns(data, source)
        rc = detect_request_columns(cols)
        if rc is None:
            raise IngestError(source, "no time and latency columns a request log has; name them with a column "
                              "mapping's [requests] table (tidelens ingest --columns)", line=1)
    frame, locate = read_requests(data, source, rc)
    frame = frame.filter(pl.col("ts_ms").is_not_null())
    if frame.height == 0:
        raise IngestError(source, "the request log has no rows with a time")
    dropped: list[str] = []

    def skip(mask: pl.Series, what: str) -> None:
        nonlocal frame
        hits = mask.arg_true()
        if hits.len():
            line = locate(int(frame["__row"][int(hits[0])]))
            at = f"line {line['line']}" if "line" in line else line.get("where", "")
            dropped.append(f"{hits.len():,} {what}, first at {at}")
            frame = frame.filter(~mask)

    if "__nan" in frame.columns:
        hits = frame["__nan"].arg_true()
        line = locate(int(frame["__row"][int(hits[0])]))
        dropped.append(f"{hits.len():,} NaN latency value(s) read as missing (the request counts, its latency "
                       f"does not), first at {'line ' + str(line['line']) if 'line' in line else line.get('where')}")
    if "__id" in frame.columns:
        skip(frame["__id"].is_not_null() & ~frame["__id"].is_first_distinct(),
             f"row(s) repeating a {rc.request_id!r} seen earlier in the log skipped")
    if con is not None:
        skip(_known_rows(frame, con), "row(s) already in the store (the same time, service, latency, status, "
                                      "pod: from a log loaded before) skipped")
    if "__unread" in frame.columns and frame["__unread"].null_count() < frame.height:  # (skipped rows gone)
        hits = frame["__unread"].drop_nulls()
        shown = ", ".join(repr(v) if v else "an empty cell" for v in hits.unique(maintain_order=True).head(3).to_list())
        dropped.append(f"{hits.len():,} request(s) whose {rc.success!r} reads neither as success nor as failure "
                       f"({shown}) counted as failed: name the success values with [requests] success_values")
    rows = frame["__row"]
    sink.add_requests(frame, locate=lambda i: locate(int(rows[i])))
    which = rc.ttft if rc.ttft else rc.latency
    parts = [f"latency from {which!r}" + (" (time to first token)" if rc.ttft else "")]
    if rc.service is None:
        parts.append(f"service {rc.service_name or Path(source).name.split('.')[0]!r} from "
                     + ("the mapping" if rc.service_name else "the file name"))
    if not (rc.status or rc.error or rc.success):
        parts.append("no status column: no request counts as an error")
    elif frame.height and frame["error"].all():
        by = ", ".join(repr(c) for c in (rc.status, rc.error, rc.success) if c)
        parts.append(f"every request reads as failed (by {by}), so no latency percentile can be drawn: if they "
                     "succeeded, name the success values with [requests] success_values = [\"...\"]")
    return "; ".join(parts + dropped)


def with_time(rc: RequestColumns, time: str, unit: str, zone: str) -> RequestColumns:
    """``rc`` reading its time from ``time`` in ``unit`` and ``zone`` (a mapping's [time])."""
    return replace(rc, time=time, time_unit=unit, time_zone=zone)
