"""Prometheus HTTP API JSON: saved ``query_range`` (matrix) and ``query`` (vector, scalar) responses.

Accepted shapes: the ``{"status", "data": {"resultType", "result"}}`` envelope, the ``data`` object
alone, or a bare ``result`` array. Large files are not materialised as Python objects: the result
array is cut into its elements (each element starts with ``{"metric"`` or similar, which cannot
occur inside a JSON string), each element's metric object is parsed with orjson and its
``values`` array, by far the bulk, is rewritten as CSV lines and parsed by polars in batches.
Anything that path cannot vouch for is parsed element by element with orjson, which is also what
names the JSON path of an error (``data.result[3].values[7]``).
"""

from __future__ import annotations

import gc
import json
import math
import re
from typing import Any

import numpy as np
import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.store import Sink

FAST_PATH_BYTES = 1 << 20  # below this, plain orjson of the whole document is fast enough
BATCH_BYTES = 32 << 20
_RESULT_RE = re.compile(rb'"result"\s*:\s*\[')
_ELEM_RE = re.compile(rb'\{\s*"(?:metric|values|value|histogram|histograms)"\s*:')
_VALUES_RE = re.compile(rb'"values"\s*:\s*\[')
_VALUES_END_RE = re.compile(rb"\]\s*\]")
_WS = b" \t\r\n"
# values text -> CSV in one pass: quotes, ']' and whitespace deleted, '[' becomes a newline
_VALUES_TO_CSV = bytes.maketrans(b"[", b"\n")


class _Series:
    """Assigns source-local series keys and announces series to the sink."""

    def __init__(self, sink: Sink, default_metric: str) -> None:
        self.sink = sink
        self.default_metric = default_metric
        self.unnamed = 0
        self.n = 0
        self.pending: list[tuple[int, str, str]] = []

    def add(self, metric: dict[str, Any], where: str, source: str) -> int:
        if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
            raise IngestError(source, "'metric' must be an object of string label values", where=f"{where}.metric")
        labels = dict(metric)
        name = labels.pop("__name__", None)
        if name is None:
            name = self.default_metric
            self.unnamed += 1
        skey = self.n
        self.n += 1
        self.pending.append((skey, name, orjson.dumps(labels).decode()))
        return skey

    def flush(self) -> None:
        if self.pending:
            skeys, names, labels = zip(*self.pending)
            self.sink.add_series(pl.DataFrame({"skey": list(skeys), "metric": list(names), "labels": list(labels)},
                                              schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))
            self.pending = []


def _pair(pair: Any, where: str, source: str) -> tuple[int, float]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise IngestError(source, "expected a [timestamp, \"value\"] pair", where=where)
    ts, val = pair
    try:
        ts_f = float(ts)
        value = float(val)
    except (TypeError, ValueError):
        raise IngestError(source, f"not a number: {pair!r} (expected [seconds, \"value\"])", where=where) from None
    if math.isnan(ts_f) or math.isinf(ts_f):
        raise IngestError(source, f"invalid timestamp {ts!r}", where=where)
    return round(ts_f * 1000.0), value


def _samples_frame(skeys: list[int], ts: list[int], values: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"skey": skeys, "ts_ms": ts, "value": values},
                        schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64})


def _element(elem: Any, i: int, prefix: str, series: _Series, sink: Sink, source: str, kind: str | None) -> int:
    """Load one result element parsed as Python objects; returns its sample count."""
    where = f"{prefix}[{i}]"
    if not isinstance(elem, dict):
        raise IngestError(source, "a result element must be an object with 'metric' and 'values'/'value'",
                          where=where)
    if "histogram" in elem or "histograms" in elem:
        raise IngestError(source, "native histograms are not supported; query the classic histogram "
                          "(the _bucket series) or histogram_quantile() instead",
                          where=f"{where}.{'histograms' if 'histograms' in elem else 'histogram'}")
    if "values" in elem and kind != "vector":
        pairs = elem["values"]
        if not isinstance(pairs, list):
            raise IngestError(source, "'values' must be a list of [timestamp, \"value\"] pairs",
                              where=f"{where}.values")
        key = "values"
    elif "value" in elem:
        pairs, key = [elem["value"]], "value"
    else:
        raise IngestError(source, "a result element needs 'values' (query_range) or 'value' (query)", where=where)
    skey = series.add(elem.get("metric", {}), where, source)
    ts, vals = [], []
    for j, pair in enumerate(pairs):
        t, v = _pair(pair, f"{where}.{key}[{j}]" if key == "values" else f"{where}.value", source)
        ts.append(t)
        vals.append(v)
    series.flush()
    sink.add_samples(_samples_frame([skey] * len(ts), ts, vals),
                     locate=lambda i: {"where": f"{where}.{key}[{i}]" if key == "values" else f"{where}.value"})
    return len(ts)


def _unwrap(doc: Any, source: str) -> tuple[str | None, Any, str]:
    """(resultType or None, result, JSON path of result) from any accepted shape."""
    if isinstance(doc, list):
        return None, doc, "result"
    if not isinstance(doc, dict):
        raise IngestError(source, "expected a Prometheus API response object or a result array", where="$")
    if doc.get("status") == "error":
        raise IngestError(source, f"the saved response is a Prometheus error ({doc.get('errorType', 'error')}: "
                          f"{doc.get('error', '')}); re-run the query and save a successful response",
                          where="status")
    # the whole response, or its "data" object saved alone
    data, prefix = (doc["data"], "data.result") if "data" in doc else (doc, "result")
    if not isinstance(data, dict) or "result" not in data:
        raise IngestError(source, "no 'data.result' in the response; save the whole body of "
                          "/api/v1/query_range or /api/v1/query", where="data")
    return data.get("resultType"), data["result"], prefix


def parse_prom_json(data: bytes, sink: Sink, source: str, *, default_metric: str = "value",
                    fast_path_bytes: int = FAST_PATH_BYTES) -> str | None:
    """Load a saved Prometheus API response into ``sink``; returns a note or None."""
    was_enabled = gc.isenabled()
    gc.disable()  # millions of small lists: pause the collector
    try:
        series = _Series(sink, default_metric)
        done = False
        if len(data) >= fast_path_bytes:
            done = _parse_large(data, sink, source, series)
        if not done:
            _parse_small(data, sink, source, series)
    finally:
        if was_enabled:
            gc.enable()
    if series.unnamed:
        return f"{series.unnamed} series without __name__ named {default_metric!r}"
    return None


def _parse_small(data: bytes, sink: Sink, source: str, series: _Series) -> None:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise IngestError(source, f"invalid JSON: {exc.msg}", line=exc.lineno,
                          where=f"column {exc.colno}") from None
    kind, result, prefix = _unwrap(doc, source)
    if kind == "scalar" or kind == "string":
        if kind == "string":
            raise IngestError(source, "a string result holds no samples", where="data.resultType")
        series_result = [{"metric": {}, "value": result}]
        _element(series_result[0], 0, prefix, series, sink, source, "vector")
        return
    if kind not in (None, "matrix", "vector"):
        raise IngestError(source, f"unknown resultType {kind!r} (expected matrix, vector or scalar)",
                          where="data.resultType")
    if not isinstance(result, list):
        raise IngestError(source, "'result' must be a list", where=prefix)
    for i, elem in enumerate(result):
        _element(elem, i, prefix, series, sink, source, kind)


def _element_starts(data: bytes, start: int) -> list[int]:
    starts = []
    for m in _ELEM_RE.finditer(data, start):
        j = m.start() - 1
        while j >= 0 and data[j] in _WS:
            j -= 1
        if j >= 0 and data[j] in b"[,":
            starts.append(m.start())
    return starts


def _parse_large(data: bytes, sink: Sink, source: str, series: _Series) -> bool:
    """The streaming path; returns False (having written nothing) when the slow path should run."""
    head = data.lstrip()[:1]
    if head == b"[":
        start = data.index(b"[") + 1
        prefix = "result"
    else:
        m = _RESULT_RE.search(data)
        if not m:
            return False
        start = m.end()
        prefix = "data.result" if b'"data"' in data[:m.start()] else "result"
    starts = _element_starts(data, start)
    if not starts:
        return False
    # The last element ends where a JSON decoder says; the rest is the envelope, checked whole.
    tail_text = data[starts[-1]:].decode("utf-8", errors="strict")
    try:
        _, end_chars = json.JSONDecoder().raw_decode(tail_text)
    except ValueError:
        return False
    last_end = starts[-1] + len(tail_text[:end_chars].encode())
    try:
        skeleton = orjson.loads(data[:start] + data[last_end:])
    except orjson.JSONDecodeError:
        return False
    kind, _, _ = _unwrap(skeleton, source)
    if kind not in (None, "matrix"):
        return False
    bounds = list(zip(starts, starts[1:] + [last_end]))
    batch: list[bytes] = []
    batch_rows: list[tuple[int, int, int]] = []  # (element index, skey, rows)
    batch_size = 0
    for i, (a, b) in enumerate(bounds):
        piece = data[a:b].rstrip(_WS)
        if i < len(bounds) - 1:
            if not piece.endswith(b","):
                raise IngestError(source, "invalid JSON: expected ',' between result elements",
                                  where=f"{prefix}[{i}]")
            piece = piece[:-1]
        m = _VALUES_RE.search(piece)
        end = None
        if m:
            cut = piece.find(b"]]", m.end())
            end = cut + 2 if cut >= 0 else (lambda e: e.end() if e else None)(_VALUES_END_RE.search(piece, m.end()))
        empty = m is not None and piece[m.end():m.end() + 64].lstrip(_WS)[:1] == b"]"
        if m is None or (end is None and not empty):
            try:
                elem = orjson.loads(piece)
            except orjson.JSONDecodeError as exc:
                raise IngestError(source, f"invalid JSON: {exc.msg}", where=f"{prefix}[{i}]") from None
            _element(elem, i, prefix, series, sink, source, kind)
            continue
        vend = (piece.index(b"]", m.end()) + 1) if empty else end
        try:
            meta = orjson.loads(piece[:m.start()] + b'"values":[]' + piece[vend:])
        except orjson.JSONDecodeError as exc:
            raise IngestError(source, f"invalid JSON: {exc.msg}", where=f"{prefix}[{i}]") from None
        if not isinstance(meta, dict) or "histogram" in meta or "histograms" in meta:
            _element(orjson.loads(piece), i, prefix, series, sink, source, kind)
            continue
        skey = series.add(meta.get("metric", {}), f"{prefix}[{i}]", source)
        if empty:
            continue
        # '[t,"v"],[t,"v"]]' -> '\nt,v,\nt,v'; bodies are joined with ',' and the batch ends with
        # ',\n', so every row is 't,v,' (a third, empty column keeps them the same width). Only
        # the batch's first body loses its leading newline: no other copy of the values is made.
        body = piece[m.end():vend].translate(_VALUES_TO_CSV, b' \t\r\n"]')
        rows = body.count(b"\n")
        if not batch:
            body = body[1:]
        batch.append(body)
        batch_rows.append((i, skey, rows))
        batch_size += len(body)
        if batch_size >= BATCH_BYTES:
            series.flush()
            _flush_values(batch, batch_rows, data, bounds, prefix, sink, source, series, kind)
            batch, batch_rows, batch_size = [], [], 0
    series.flush()
    _flush_values(batch, batch_rows, data, bounds, prefix, sink, source, series, kind)
    return True


def _flush_values(batch: list[bytes], batch_rows: list[tuple[int, int, int]], data: bytes,
                  bounds: list[tuple[int, int]], prefix: str, sink: Sink, source: str, series: _Series,
                  kind: str | None) -> None:
    if not batch:
        return
    total = sum(r for _, _, r in batch_rows)
    try:
        frame = pl.read_csv(b",".join(batch + [b"\n"]), has_header=False, quote_char=None,
                            schema={"t": pl.Float64, "v": pl.Float64, "x": pl.Utf8})
        good = (frame.height == total and frame["t"].null_count() == 0 and frame["v"].null_count() == 0
                and frame["x"].null_count() == total)
    except Exception:
        good = False
    if not good:
        # Find the culprit the slow way: it raises with the element's JSON path.
        for i, _, _ in batch_rows:
            a, b = bounds[i]
            elem = orjson.loads(data[a:b].rstrip(_WS).rstrip(b","))
            for j, pair in enumerate(elem.get("values", [])):
                _pair(pair, f"{prefix}[{i}].values[{j}]", source)
        raise IngestError(source, "unreadable values array", where=f"{prefix}[{batch_rows[0][0]}].values")
    skeys = np.repeat(np.array([s for _, s, _ in batch_rows], dtype=np.int64),
                      np.array([r for _, _, r in batch_rows], dtype=np.int64))
    ends = np.cumsum([r for _, _, r in batch_rows])

    def locate(i: int) -> dict[str, str]:
        k = int(np.searchsorted(ends, i, side="right"))
        return {"where": f"{prefix}[{batch_rows[k][0]}].values[{i - (int(ends[k - 1]) if k else 0)}]"}

    ts_s = frame["t"]
    if ts_s.abs().max() > 9.2e15:  # beyond int64 milliseconds: a timestamp no calendar has
        i = int((ts_s.abs() > 9.2e15).arg_true()[0])
        raise IngestError(source, f"timestamp {ts_s[i]!r} is far outside any plausible time", **locate(i))
    sink.add_samples(pl.DataFrame({
        "skey": skeys,
        "ts_ms": (ts_s * 1000.0).round().cast(pl.Int64),
        "value": frame["v"]}), locate=locate)
