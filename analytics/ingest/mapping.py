"""A column mapping for any CSV or Parquet: which column is time, which are values, where the
metric name comes from, which columns are labels, and which standard signal a metric stands for.

Written as TOML (``tidelens ingest --columns mapping.toml FILE...``)::

    [time]
    column = "timestamp_anon"
    unit = "s"            # s, ms, us, ns, or iso (ISO-8601; zone below for times without one)
    zone = "UTC"

    [metric]              # one of: column = "...", name = "...", or from_file = true
    name = "duty_cycle"

    [values]              # one column: long layout; several: wide (each column its own metric)
    columns = ["value"]

    [labels]              # column -> label
    container_ip = "pod"

    [signals.duty_cycle]  # a metric -> the standard metric it stands for, times a scale
    metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    scale = 0.01
    [device]              # what one GPU is (:mod:`analytics.ingest.device`): per = "pod" or columns = [...]
    per = "pod"

A per-request log (one row per request) takes a ``[requests]`` table instead of ``[values]``
(:mod:`analytics.ingest.requests`; ``[time]`` as above, its unit also ``clf`` or ``auto``)::

    [requests]
    latency = "elapsed"   # and latency_unit = "s" | "ms" | "us"; or ttft = "..." with ttft_unit
    latency_unit = "ms"
    service = "upstream"  # a column; or service_name = "chat-vllm"
    status = "code"       # optional: status, error, success, tokens, pod, namespace
    # success = "predict_status" and success_values = ["SUCCEED"]: which values mean success

The mapping's digest is part of the source's identity: the same file under another mapping is a
new load. Errors name the file, the line and the column; a mapping that gives no signal any
analysis reads says so before anything is loaded.

>>> m = ColumnMapping(time="t", values=("v",), metric="request_rate")
>>> m.layout, len(m.digest())
('long', 16)
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from analytics.config import read_toml_file
from analytics.errors import ConfigError, IngestError
from analytics.ingest.archives import table_bytes
from analytics.ingest.device import check_device, device_label, read_device_table, shared_note
from analytics.ingest.requests import CLF_FORMAT, RequestColumns, detect_request_columns, parse_requests, with_time
from analytics.ingest.tabular import _names as names
from analytics.ingest.tabular import check_header_width, check_parquet_width
from analytics.signals import SIGNALS
from analytics.store import Sink
from analytics.times import EPOCH_UNIT_MS, epoch_unit

if TYPE_CHECKING:
    from analytics.ingest.requests import RequestColumns

_RATE = re.compile(r"(^|[^a-z])(rps|qps|request_rate|requests_per_second|rate_rps|req_rate|request_rps)([^a-z]|$)")


@dataclass(frozen=True)
class ColumnMapping:
    """What each column of a table means (see the module's TOML)."""

    time: str
    time_unit: str = "s"
    time_zone: str = "UTC"
    values: tuple[str, ...] = ()
    metric: str | None = None  # a constant name
    metric_column: str | None = None  # or a column holding it
    metric_from_file: bool = False  # or the file's name
    labels: dict[str, str] = field(default_factory=dict)  # column -> label
    signals: dict[str, tuple[str, float]] = field(default_factory=dict)  # metric -> (standard, scale)
    requests: "RequestColumns | None" = None  # a per-request log: which column is what
    device_columns: tuple[str, ...] = ()  # the column(s) identifying one GPU ([device] columns)
    device_per: str | None = None  # or "pod": one GPU per pod ([device] per)

    @property
    def layout(self) -> str:
        if self.requests is not None:
            return "requests"
        return "wide" if len(self.values) > 1 else "long"

    def request_columns(self) -> "RequestColumns":
        """The ``[requests]`` reading with this mapping's ``[time]``."""

        assert self.requests is not None
        return with_time(self.requests, self.time, self.time_unit, self.time_zone)

    def digest(self) -> str:
        """A short hash of the mapping (part of the source's identity)."""
        blob = orjson.dumps({"time": [self.time, self.time_unit, self.time_zone], "values": list(self.values),
                             "metric": [self.metric, self.metric_column, self.metric_from_file],
                             "labels": self.labels, "signals": {k: list(v) for k, v in self.signals.items()},
                             **({"requests": self.requests.as_dict()} if self.requests is not None else {}),
                             # only when set: the digests of mappings without one stay as they were
                             **({"device": [list(self.device_columns), self.device_per]}
                                if self.device_columns or self.device_per else {})},
                            option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(blob).hexdigest()[:16]

    def check(self, where: str) -> None:
        if not self.time:
            raise ConfigError(f"{where}: [time] column is required")
        if not zone_ok(self.time_zone):
            raise ConfigError(f"{where}: [time] zone {_short(self.time_zone)} is no time zone; write an IANA name "
                              "such as zone = \"UTC\" or zone = \"Europe/Paris\"")
        for name, (standard, scale) in self.signals.items():
            if not standard.strip():
                raise ConfigError(f"{where}: [signals.{name}] metric is empty; write metric = "
                                  "\"DCGM_FI_PROF_GR_ENGINE_ACTIVE\" (the standard metric it stands for)")
            if not math.isfinite(scale) or scale == 0:
                raise ConfigError(f"{where}: [signals.{name}] scale = {scale!r} would make every value "
                                  f"{'0' if scale == 0 else 'NaN or infinite'}; write a finite, non-zero number such as "
                                  "scale = 0.01")
        for what, x in (("[metric] name", self.metric), ("[metric] column", self.metric_column)):
            if x is not None and not x.strip():
                raise ConfigError(f"{where}: {what} is empty; write a metric name, e.g. name = \"duty_cycle\"")
        if self.requests is not None:
            self.request_columns().check(where)
            return

        check_device(self.device_columns, self.device_per, self.labels, where)
        if self.time_unit not in (*EPOCH_UNIT_MS, "iso"):
            raise ConfigError(f"{where}: [time] unit {self.time_unit!r}: one of s, ms, us, ns, iso")
        if not self.values:
            raise ConfigError(f"{where}: [values] columns is required (one column, or several for a wide table)")
        named = sum((self.metric is not None, self.metric_column is not None, self.metric_from_file))
        if self.layout == "long" and named != 1:
            raise ConfigError(f"{where}: [metric] needs exactly one of column, name or from_file = true")


def zone_ok(zone: str) -> bool:
    """Whether ``zone`` is a time zone the readers can apply (polars' database: IANA names, offsets)."""
    try:
        pl.Series([0]).cast(pl.Datetime("ms")).dt.replace_time_zone(zone)
    except Exception:  # polars raises ComputeError (or a panic) for a name it does not know
        return False
    return True


def _names(cols: list[str], shown: int = 8) -> str:
    return names(cols, shown)


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:60] + "…"


def _kind(x: Any) -> str:
    return {list: "a list", dict: "a table", bool: "a boolean", int: "an integer", float: "a number",
            str: "a string"}.get(type(x), type(x).__name__)


# The mapping's tables and keys: what each must be, and an example of what to write.
_STR, _BOOL, _STRS = "a string", "true or false", "a string or a list of strings"
_SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "time": {"column": (_STR, 'column = "timestamp"'), "unit": (_STR, 'unit = "s"'), "zone": (_STR, 'zone = "UTC"')},
    "metric": {"name": (_STR, 'name = "duty_cycle"'), "column": (_STR, 'column = "metric"'),
               "from_file": (_BOOL, "from_file = true")},
    "values": {"columns": (_STRS, 'columns = ["value"]')},
}


def _typed(p: Path, table: str, key: str, x: Any, kind: str, example: str) -> Any:
    ok = (isinstance(x, bool) if kind == _BOOL else isinstance(x, str) if kind == _STR
          else isinstance(x, str) or (isinstance(x, list) and all(isinstance(c, str) for c in x)))
    if not ok:
        raise ConfigError(f"{p}: [{table}] {key} is {_kind(x)} ({_short(x)}); it must be {kind}: write {example}")
    if isinstance(x, str) and not x.strip():
        raise ConfigError(f"{p}: [{table}] {key} is empty; write {example}")
    if isinstance(x, list) and not all(c.strip() for c in x):
        raise ConfigError(f"{p}: [{table}] {key} holds an empty name; write {example}")
    return x


def _table(p: Path, doc: dict[str, Any], name: str) -> dict[str, Any]:
    t = doc.get(name, {})
    if not isinstance(t, dict):
        raise ConfigError(f"{p}: {name} is {_kind(t)} ({_short(t)}); it must be a table: write [{name}] on a line "
                          "of its own, its keys below")
    spec = _SCHEMA.get(name)
    if spec is not None:
        unknown = sorted(set(t) - set(spec))
        if unknown:
            raise ConfigError(f"{p}: [{name}] has no key {_short(unknown[0])}; its keys: {', '.join(spec)}")
        for key, x in t.items():
            _typed(p, name, key, x, *spec[key])
    return t


def load_mapping(path: str | Path) -> ColumnMapping:
    """A mapping from its TOML file; errors name the file, the key and what to write instead.

    Every table and key is checked against :data:`_SCHEMA` (a list where a name is expected, an
    integer metric name, an unknown zone, ``scale = inf``, an empty name are each refused).
    """
    p = Path(path)
    doc = read_toml_file(p, "column mapping", "a mapping names a few columns: is this the mapping file?")
    known = ("time", "metric", "values", "labels", "signals", "requests", "device")
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise ConfigError(f"{p}: no table or key {_short(unknown[0])} in a column mapping; its tables: "
                          f"{', '.join(f'[{k}]' for k in known)}")
    t, m, v = _table(p, doc, "time"), _table(p, doc, "metric"), _table(p, doc, "values")
    labels = _table(p, doc, "labels")
    for col, label in labels.items():
        _typed(p, "labels", col, label, _STR, f'{_short(col) if col.isidentifier() else repr(col)} = "<label name>"')
    signals = {}
    for name, sig in _table(p, doc, "signals").items():
        if not isinstance(sig, dict):
            raise ConfigError(f"{p}: signals.{name} is {_kind(sig)}; write a table [signals.{name}] with "
                              "metric = \"<standard metric name>\" and scale = <number>")
        unknown = sorted(set(sig) - {"metric", "scale"})
        if unknown:
            raise ConfigError(f"{p}: [signals.{name}] has no key {_short(unknown[0])}; its keys: metric, scale")
        _typed(p, f"signals.{name}", "metric", sig.get("metric"), _STR, 'metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"')
        scale = sig.get("scale", 1.0)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise ConfigError(f"{p}: [signals.{name}] scale is {_kind(scale)} ({_short(scale)}); write a number, "
                              "e.g. scale = 0.01")
        signals[name] = (sig["metric"], float(scale))
    cols = v.get("columns", [])
    if isinstance(cols, str):
        cols = [cols]
    requests = None
    if "requests" in doc:
        requests = _request_table(doc["requests"], p)

    device_columns, device_per = read_device_table(p, doc)
    mapping = ColumnMapping(
        time=t.get("column", ""), time_unit=t.get("unit", "s"), time_zone=t.get("zone", "UTC"),
        values=tuple(cols), metric=m.get("name"), metric_column=m.get("column"),
        metric_from_file=m.get("from_file", False), labels=dict(labels), signals=signals, requests=requests,
        device_columns=device_columns, device_per=device_per)
    mapping.check(str(p))
    return mapping


_REQUEST_KEYS = ("latency", "latency_unit", "ttft", "ttft_unit", "service", "service_name", "status", "error",
                 "success", "success_values", "tokens", "pod", "namespace", "request_id")


def _request_table(table: Any, where: Path) -> "RequestColumns":
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [requests] must be a table (latency = \"<column>\", ...)")
    unknown = sorted(set(table) - set(_REQUEST_KEYS))
    if unknown:
        raise ConfigError(f"{where}: [requests] has no key {', '.join(unknown)}; its keys: {', '.join(_REQUEST_KEYS)}")
    for k, x in table.items():
        if k == "success_values":
            _typed(where, "requests", k, x, _STRS, 'success_values = ["SUCCEED"]')
            continue
        _typed(where, "requests", k, x, _STR, f'{k} = "{"ms" if k.endswith("_unit") else "<column name>"}"')
    if "success_values" in table:  # one value or several
        table = {**table, "success_values": tuple([sv] if isinstance(sv := table["success_values"], str) else sv)}
    return RequestColumns(time="", **table)


def _known_metrics() -> set[str]:
    out: set[str] = set()
    for s in SIGNALS:
        out.update(s.metrics)
        out.update(s.aliases)
    return out


def _read(data: bytes, source: str) -> pl.DataFrame:
    if data[:4] == b"PAR1":

        check_parquet_width(data, source)
        try:
            frame = pl.read_parquet(io.BytesIO(data))
        except pl.exceptions.PolarsError as exc:
            raise IngestError(source, f"not a readable Parquet file ({exc})") from None
        return frame.select(pl.all().cast(pl.Utf8))

    check_header_width(data, source)
    try:
        return pl.read_csv(io.BytesIO(data), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        raise IngestError(source, f"not a readable CSV ({exc})") from None


def _bad(frame: pl.DataFrame, mask: pl.Series, column: str, what: str, source: str) -> None:
    rows = mask.arg_true()
    if rows.len():
        i = int(rows[0])
        raise IngestError(source, f"column {column!r}: {frame[column][i]!r} is not {what}", line=i + 2)


def parse_mapped(data: bytes, sink: Sink, source: str, mapping: ColumnMapping, *, con: Any = None) -> str | None:
    """Load a CSV or Parquet table through ``mapping`` into ``sink``; returns a note or None.

    ``con``: the store's connection, for a request log's rows already loaded (see ``parse_requests``).
    """
    if mapping.requests is not None:

        note = parse_requests(data, sink, source, mapping.request_columns(), con=con)
        return f"column mapping {mapping.digest()} (a request log): {note}"
    frame = _read(data, source)
    needed = [mapping.time, *mapping.values, *mapping.labels, *mapping.device_columns,
              *([mapping.metric_column] if mapping.metric_column else [])]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise IngestError(source, f"the mapping names column(s) {', '.join(map(repr, missing))} the table does "
                          f"not have; its columns: {_names(frame.columns)}", line=1)
    raw_t = frame[mapping.time]
    if mapping.time_unit == "iso":
        parsed = raw_t.str.strip_chars().str.to_datetime(time_zone=mapping.time_zone, strict=False,
                                                          time_unit="ms", ambiguous="earliest")
        _bad(frame, parsed.is_null() & raw_t.is_not_null(), mapping.time, "an ISO-8601 time", source)
        ts = parsed.dt.convert_time_zone("UTC").dt.epoch("ms")
    else:
        num = raw_t.cast(pl.Float64, strict=False)
        _bad(frame, num.is_null() & raw_t.is_not_null(), mapping.time,
             f"a number of {mapping.time_unit} since the epoch", source)
        ts = (num * EPOCH_UNIT_MS[mapping.time_unit]).round(0).cast(pl.Int64)

    device = device_label(mapping.device_columns, mapping.device_per, mapping.labels)
    label_exprs = [pl.col(c).alias(lb) for c, lb in mapping.labels.items()] + ([device] if device is not None else [])
    labels = frame.select(label_exprs) if label_exprs else None
    parts = []
    stem = Path(source).name.split(".")[0] or "value"
    for col in mapping.values:
        vals = frame[col].cast(pl.Float64, strict=False)
        _bad(frame, vals.is_null() & frame[col].is_not_null() & (frame[col] != ""), col, "a number", source)
        if mapping.layout == "wide":
            metric = pl.lit(col)
        elif mapping.metric_column:
            metric = pl.col("__metric")
        else:
            metric = pl.lit(mapping.metric or stem)
        part = pl.DataFrame({"ts_ms": ts, "value": vals, "__row": pl.int_range(0, frame.height, eager=True)})
        if mapping.metric_column:
            part = part.with_columns(frame[mapping.metric_column].alias("__metric"))
        part = part.with_columns(metric.alias("metric"))
        if labels is not None:
            part = pl.concat([part, labels], how="horizontal")
        parts.append(part.drop("__metric", strict=False))
    long = pl.concat(parts, how="vertical").filter(pl.col("value").is_not_null() & pl.col("ts_ms").is_not_null())
    if long.height == 0:
        raise IngestError(source, "the mapping gives no rows with both a time and a value")
    empty = long["metric"].is_null() | (long["metric"].str.strip_chars() == "")
    if empty.any():
        row = int(long["__row"][int(empty.arg_true()[0])])
        raise IngestError(source, f"column {mapping.metric_column!r}: an empty metric name; every row needs one",
                          line=row + 2)
    # a metric standing for a standard signal: renamed and scaled
    for name, (standard, scale) in mapping.signals.items():
        hit = pl.col("metric") == name
        long = long.with_columns(pl.when(hit).then(pl.lit(standard)).otherwise(pl.col("metric")).alias("metric"),
                                 pl.when(hit).then(pl.col("value") * scale).otherwise(pl.col("value")).alias("value"))
    out_metrics = sorted(long["metric"].unique().to_list())
    known = _known_metrics()
    if not any(m in known or _RATE.search(m.lower()) for m in out_metrics):
        raise IngestError(source, f"the mapping gives metric(s) {_names(out_metrics)}, none of which any "
                          "analysis reads: map one onto a standard signal with [signals.<metric>] (e.g. "
                          "metric = \"DCGM_FI_PROF_GR_ENGINE_ACTIVE\", or a request_rate), see `tidelens signals`")
    label_cols = list(labels.columns) if labels is not None else []
    shared = None if device is not None else shared_note(long, label_cols)
    keyed = long.with_columns(
        (pl.struct(label_cols).map_elements(lambda s: orjson.dumps({k: v for k, v in s.items() if v is not None},
                                                                   option=orjson.OPT_SORT_KEYS).decode(),
                                            return_dtype=pl.Utf8) if label_cols else pl.lit("{}")).alias("labels"))
    series = keyed.select("metric", "labels").unique(maintain_order=True).with_row_index("skey")
    joined = keyed.join(series, on=["metric", "labels"], how="left")
    sink.add_series(series.select(pl.col("skey").cast(pl.Int64), "metric", "labels"))
    rows = joined["__row"].to_list()
    sink.add_samples(joined.select(pl.col("skey").cast(pl.Int64), "ts_ms", "value"),
                     locate=lambda i: {"line": int(rows[i]) + 2})
    note = f"column mapping {mapping.digest()}: {series.height} series of {_names(out_metrics)}"
    if device is not None:
        note += ("; each pod its own GPU (UUID pod/<pod>)" if mapping.device_per == "pod"
                 else f"; a GPU is each {' + '.join(map(repr, mapping.device_columns))}")
    return note + (f"; {shared}" if shared else "")


# The standard metrics a mapped column most often stands for (the Data page's choices).
STANDARD_SIGNALS: dict[str, str] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "GPU activity, 0-1 (GR_ENGINE_ACTIVE)",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilisation, % (GPU_UTIL)",
    "DCGM_FI_DEV_FB_USED": "GPU memory used, MiB (FB_USED)",
    "DCGM_FI_DEV_POWER_USAGE": "GPU power, W",
    "request_rate": "requests per second (traffic)",
}
_TIME_NAMES = ("timestamp", "time", "ts", "ts_ms", "ts_s", "datetime", "date", "when")


def read_table(data: bytes, source: str) -> pl.DataFrame:
    """The table as text columns (what a mapping is applied to, and what the form previews); of an
    archive, its first table (:func:`analytics.ingest.archives.table_bytes`)."""

    source, data = table_bytes(source, data)
    return _read(data, source)


def guess_mapping(frame: pl.DataFrame, name: str = "") -> ColumnMapping:
    """A first mapping for a table: the time column (by name, else the first column of epoch
    numbers or ISO times) and its unit, numeric columns as values, the rest as labels.

    >>> f = pl.DataFrame({"timestamp_anon": ["1767571200"], "container_ip": ["10.0.0.1"], "duty": ["45"]})
    >>> m = guess_mapping(f)
    >>> (m.time, m.time_unit, m.values, m.labels)
    ('timestamp_anon', 's', ('duty',), {'container_ip': 'container_ip'})
    """

    def numeric(col: str) -> bool:
        s = frame[col].drop_nulls()
        return s.len() > 0 and s.cast(pl.Float64, strict=False).null_count() == 0

    def isoish(col: str) -> bool:
        s = frame[col].drop_nulls().head(20)
        return s.len() > 0 and s.str.strip_chars().str.to_datetime(strict=False).null_count() == 0

    cols = frame.columns
    by_name = [c for c in cols if c.lower() in _TIME_NAMES or c.lower().startswith(("timestamp", "time"))]
    time = next(iter(by_name), None) or next((c for c in cols if numeric(c) or isoish(c)), cols[0] if cols else "")
    def unit_of(col: str) -> str:
        if col and numeric(col):
            return epoch_unit(float(frame[col].drop_nulls().cast(pl.Float64)[0]))
        clf = frame[col].drop_nulls().head(20).str.strip_chars().str.to_datetime(
            CLF_FORMAT, strict=False) if col else None
        return "clf" if clf is not None and clf.len() and clf.null_count() == 0 else "iso"

    logged = detect_request_columns(cols)
    if logged is not None:  # a request log's header: one row per request
        return ColumnMapping(time=logged.time, time_unit=unit_of(logged.time), requests=logged)
    unit = unit_of(time)
    values = tuple(c for c in cols if c != time and numeric(c))
    labels = {c: c for c in cols if c != time and c not in values}
    stem = Path(name).name.split(".")[0] or "value"
    return ColumnMapping(time=time, time_unit=unit, values=values, metric=stem if len(values) <= 1 else None,
                         labels=labels)


def mapping_toml(m: ColumnMapping) -> str:
    """The mapping as the TOML :func:`load_mapping` reads (saved beside the store by the Data page)."""
    import tomli_w

    doc: dict[str, Any] = {"time": {"column": m.time, "unit": m.time_unit, "zone": m.time_zone}}
    if m.requests is not None:
        r = m.requests  # a unit is written only beside its column
        doc["requests"] = {k: list(v) if isinstance(v, tuple) else v for k in _REQUEST_KEYS
                           if (v := getattr(r, k)) is not None
                           and not (k == "latency_unit" and r.latency is None)
                           and not (k == "ttft_unit" and r.ttft is None)}
        return tomli_w.dumps(doc)
    doc["values"] = {"columns": list(m.values)}
    metric: dict[str, Any] = {}
    if m.metric is not None:
        metric["name"] = m.metric
    elif m.metric_column is not None:
        metric["column"] = m.metric_column
    elif m.metric_from_file:
        metric["from_file"] = True
    if metric:
        doc["metric"] = metric
    if m.labels:
        doc["labels"] = dict(m.labels)
    if m.signals:
        doc["signals"] = {k: {"metric": std, "scale": scale} for k, (std, scale) in m.signals.items()}
    if m.device_per or m.device_columns:
        doc["device"] = {"per": m.device_per} if m.device_per else {"columns": list(m.device_columns)}
    return tomli_w.dumps(doc)
