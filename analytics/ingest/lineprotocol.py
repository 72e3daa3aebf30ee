"""InfluxDB line protocol as Telegraf writes it, onto the names the analyses read.

``measurement[,tag=value...] field=value[,field=value...] [timestamp]``, nanoseconds by default.
Three shapes are recognised:

- Telegraf's ``nvidia_smi`` input (``nvidia_smi,index=0,uuid=GPU-..,name=.. utilization_gpu=87i,
  memory_used=61000i,...``): fields onto dcgm-exporter's names (``utilization_gpu`` ->
  ``DCGM_FI_DEV_GPU_UTIL``, ``memory_used`` -> ``DCGM_FI_DEV_FB_USED``, ...), tags onto its labels
  (``uuid`` -> ``UUID``, ``index`` -> ``gpu``, ``name`` -> ``modelName``, ``host`` -> ``Hostname``). It
  has no pod tags: its GPUs follow the idle/unknown rule of GPUs without a pod label;
- its ``prometheus`` input, ``metric_version = 2``: measurement ``prometheus``, one field per
  metric named as Prometheus names it, labels (``le`` included) as tags;
- ``metric_version = 1``: the metric is the measurement; a gauge or counter is field ``gauge``,
  ``counter`` or ``value``; a histogram's buckets are fields named by their bound (``0.1=``,
  ``+Inf=``) beside ``count`` and ``sum``, read back as ``<name>_bucket{le=..}``, ``_count``, ``_sum``.

Any other measurement is kept as ``<measurement>_<field>``. String and boolean fields are skipped
(counted in the note).

>>> split_line('nvidia_smi,index=0,name=Tesla\\\\ T4 utilization_gpu=87i 1700000000000000000')
('nvidia_smi', {'index': '0', 'name': 'Tesla T4'}, {'utilization_gpu': 87.0}, 1700000000000000000)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.ingest.series_index import SeriesIndex
from analytics.limits import IngestLimits
from analytics.sink import Sink, too_many_series

NVIDIA_SMI_FIELDS = {
    "utilization_gpu": "DCGM_FI_DEV_GPU_UTIL", "memory_used": "DCGM_FI_DEV_FB_USED",
    "memory_free": "DCGM_FI_DEV_FB_FREE", "memory_total": "DCGM_FI_DEV_FB_TOTAL",
    "power_draw": "DCGM_FI_DEV_POWER_USAGE", "temperature_gpu": "DCGM_FI_DEV_GPU_TEMP",
    "utilization_memory": "DCGM_FI_DEV_MEM_COPY_UTIL", "fan_speed": "DCGM_FI_DEV_FAN_SPEED",
    "clocks_current_sm": "DCGM_FI_DEV_SM_CLOCK", "clocks_current_memory": "DCGM_FI_DEV_MEM_CLOCK",
    "utilization_encoder": "DCGM_FI_DEV_ENC_UTIL", "utilization_decoder": "DCGM_FI_DEV_DEC_UTIL",
}
NVIDIA_SMI_TAGS = {"uuid": "UUID", "index": "gpu", "name": "modelName", "host": "Hostname",
                   "pci_bus_id": "pci_bus_id", "compute_mode": "compute_mode", "pstate": "pstate"}
_V1_SCALARS = ("gauge", "counter", "value", "untyped")


class _Bad(ValueError):
    pass


class _TooWide(ValueError):
    """A line with more fields than a table may have columns: a limit, not a syntax error."""


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _split(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside backslash escapes and double-quoted strings."""
    if "\\" not in text and '"' not in text:  # nothing escaped or quoted: the same cut, in C
        return text.split(sep)
    parts, cur, i, quoted = [], [], 0, False
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        if c == sep and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if quoted:
        raise _Bad("an unterminated string field")
    parts.append("".join(cur))
    return parts


def _key_value(kv: str) -> tuple[str, str, bool]:
    """``key, value, found`` split at the first ``=`` not escaped by a backslash."""
    i = 0
    while i < len(kv):
        if kv[i] == "\\":
            i += 2
            continue
        if kv[i] == "=":
            return kv[:i], kv[i + 1:], True
        i += 1
    return kv, "", False


_INT = re.compile(r"^[+-]?[0-9]+$")
_UINT = re.compile(r"^[0-9]+$")
INT64 = 2**63


def _field_value(raw: str) -> float | None:
    """A numeric field's value (NaN or infinite kept for the caller to drop and count); ``None``
    for a string or boolean field. An integer (``i``) or unsigned (``u``) field must be one that
    fits 64 bits, as InfluxDB requires: ``1.5e10000i`` is no integer."""
    if raw.startswith('"'):
        return None
    if raw in ("t", "T", "true", "True", "TRUE", "f", "F", "false", "False", "FALSE"):
        return None
    if raw[-1:] in ("i", "u"):
        text = raw[:-1]
        signed = raw[-1] == "i"
        if not (_INT if signed else _UINT).match(text):
            raise _Bad(f"field value {raw!r} is not an {'integer' if signed else 'unsigned integer'} (digits "
                       f"then '{raw[-1]}')")
        n = int(text)
        if not (-INT64 <= n < INT64 if signed else 0 <= n < 2 * INT64):
            raise _Bad(f"field value {raw[:40]!r} does not fit a 64-bit {'integer' if signed else 'unsigned integer'}")
        return float(n)
    try:
        return float(raw)
    except ValueError:
        raise _Bad(f"field value {raw!r} is not a number, a string or a boolean") from None


def split_line(line: str, max_fields: int | None = None
               ) -> tuple[str, dict[str, str], dict[str, float | None], int | None]:
    """``(measurement, tags, fields, timestamp_ns or None)`` of one line; a line of more than
    ``max_fields`` fields is refused (:class:`_TooWide`) before any of them is read."""
    sections = [s for s in _split(line.strip(), " ") if s != ""]
    if len(sections) not in (2, 3):
        raise _Bad("expected 'measurement[,tags] fields [timestamp]'")
    head = _split(sections[0], ",")
    measurement = _unescape(head[0])
    if not measurement:
        raise _Bad("the measurement name is empty")
    tags = {}
    for kv in head[1:]:
        k, v, eq = _key_value(kv)
        if not eq or not k:
            raise _Bad(f"tag {kv!r} is not key=value")
        key = _unescape(k)
        if key in tags:
            raise _Bad(f"tag {key!r} given twice (InfluxDB would keep one silently): write each tag once")
        tags[key] = _unescape(v)
    fields: dict[str, float | None] = {}
    parts = _split(sections[1], ",")
    if max_fields is not None and len(parts) > max_fields:
        raise _TooWide(f"{len(parts):,} fields in one line, more than {max_fields:,} (a line is a row of a "
                       "table, each field a column and a series of its own): refused; split the line, or "
                       "raise TIDELENS_MAX_COLUMNS")
    for kv in parts:
        k, v, eq = _key_value(kv)
        if not eq or not k or not v:
            raise _Bad(f"field {kv!r} is not key=value")
        key = _unescape(k)
        if key in fields:
            raise _Bad(f"field {key!r} given twice: write each field once")
        fields[key] = _field_value(v)
    ts = None
    if len(sections) == 3:
        if not _INT.match(sections[2]):
            raise _Bad(f"timestamp {sections[2][:40]!r} is not an integer (nanoseconds)")
        ts = int(sections[2])
        if not -INT64 <= ts < INT64:
            raise _Bad(f"timestamp {sections[2][:40]!r} is beyond any representable time (nanoseconds since 1970)")
    return measurement, tags, fields, ts


def _samples_of(measurement: str, tags: dict[str, str], fields: dict[str, float | None]
                ) -> list[tuple[str, dict[str, str], float]]:
    if measurement == "nvidia_smi":
        labels = {NVIDIA_SMI_TAGS.get(k, k): v for k, v in tags.items()}
        return [(NVIDIA_SMI_FIELDS.get(f, f"nvidia_smi_{f}"), labels, v) for f, v in fields.items() if v is not None]
    if measurement == "prometheus":  # metric_version = 2
        return [(f, tags, v) for f, v in fields.items() if v is not None]
    numeric = {f: v for f, v in fields.items() if v is not None}
    bounds = {f: v for f, v in numeric.items() if f == "+Inf" or _is_number(f)}
    if bounds and "count" in numeric:  # metric_version = 1 histogram
        out = [(f"{measurement}_bucket", {**tags, "le": _le(f)}, v) for f, v in bounds.items()]
        out.append((f"{measurement}_count", tags, numeric["count"]))
        if "sum" in numeric:
            out.append((f"{measurement}_sum", tags, numeric["sum"]))
        return out
    if len(numeric) == 1 and next(iter(numeric)) in _V1_SCALARS:  # metric_version = 1 gauge/counter
        return [(measurement, tags, next(iter(numeric.values())))]
    return [(f"{measurement}_{f}", tags, v) for f, v in numeric.items()]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _le(bound: str) -> str:
    return "+Inf" if bound == "+Inf" else f"{float(bound):g}"


def _decode(data: bytes, source: str, lines_before: int = 0) -> str:
    try:
        return data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise IngestError(source, f"not UTF-8 text ({exc.reason} at byte {exc.start - line_start} of the line)",
                          line=lines_before + data.count(b"\n", 0, exc.start) + 1) from None


def parse_line_protocol(chunks: Iterable[bytes], sink: Sink, source: str, *,
                        default_ts_ms: int | None = None) -> str | None:
    """Load Telegraf's line protocol, given as newline-aligned ``chunks``, into ``sink``; returns a
    note or None.

    NaN and infinite float fields are dropped and counted in the note, with the first line, as
    the exposition reader does for counters (line protocol has no such values: InfluxDB refuses
    them and Telegraf's serializer drops them, so one here is no reading).

    Chunk by chunk: its samples go to the sink as it is read, and the series seen so far are one
    polars frame (``metric, labels -> skey``), a chunk's new ones counted against the series limit
    before they are kept (:class:`~analytics.ingest.series_index.SeriesIndex`; a file of 2.1
    million series, read whole into Python objects, was refused after 91 s at 1.8 GB).
    """
    limits = IngestLimits.from_env()
    known = SeriesIndex(("metric", "labels"))
    n_series = samples = skipped = nonfinite = first_nonfinite = lines_before = 0
    for chunk in chunks:
        metrics: list[str] = []
        labels_json: list[str] = []
        ts_col: list[int] = []
        vals: list[float] = []
        lines_of: list[int] = []
        for n, line in enumerate(_decode(chunk, source, lines_before).split("\n"), start=lines_before + 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                measurement, tags, fields, ts = split_line(line, limits.max_columns)
            except _Bad as exc:
                raise IngestError(source, f"not InfluxDB line protocol: {exc}", line=n) from None
            except _TooWide as exc:
                raise IngestError(source, str(exc), line=n) from None
            if ts is None:
                if default_ts_ms is None:
                    raise IngestError(source, "a line without a timestamp: write Telegraf's output with timestamps (precision ns)", line=n)
                ts_ms = default_ts_ms
            else:
                ts_ms = ts // 1_000_000  # nanoseconds, Telegraf's default precision
            skipped += sum(v is None for v in fields.values())
            odd = [f for f, v in fields.items() if v is not None and not math.isfinite(v)]
            if odd:
                nonfinite += len(odd)
                first_nonfinite = first_nonfinite or n
                fields = {f: (None if f in odd else v) for f, v in fields.items()}
            for metric, labels, value in _samples_of(measurement, tags, fields):
                metrics.append(metric)
                labels_json.append(orjson.dumps(dict(sorted(labels.items()))).decode())
                ts_col.append(ts_ms)
                vals.append(value)
                lines_of.append(n)
        lines_before += chunk.count(b"\n")
        if not metrics:
            continue
        rows = pl.DataFrame({"metric": metrics, "labels": labels_json, "ts_ms": ts_col, "value": vals,
                             "line": lines_of},
                            schema={"metric": pl.Utf8, "labels": pl.Utf8, "ts_ms": pl.Int64, "value": pl.Float64,
                                    "line": pl.Int64})
        del metrics, labels_json, ts_col, vals, lines_of
        rows = known.lookup(rows)
        fresh = rows.filter(pl.col("skey").is_null()).unique(["metric", "labels"], keep="first", maintain_order=True)
        if fresh.height:
            room = limits.max_series - n_series
            if fresh.height > room:
                raise too_many_series(source, limits.max_series, int(fresh["line"][room]), what="tag")
            fresh = fresh.select("metric", "labels", (pl.int_range(0, fresh.height, dtype=pl.Int64) + n_series)
                                 .alias("skey"))
            n_series += fresh.height
            sink.add_series(fresh.select("skey", "metric", "labels"))
            known.add(fresh)
            rows = (rows.join(fresh.rename({"skey": "skey_new"}), on=["metric", "labels"], how="left",
                              maintain_order="left")
                    .with_columns(pl.coalesce("skey", "skey_new").alias("skey")))
        line_col = rows["line"]
        sink.add_samples(rows.select("skey", "ts_ms", "value"), locate=lambda i, lines=line_col: {"line": int(lines[i])})
        samples += rows.height
    if not samples:
        raise IngestError(source, "no numeric field in any line" + (
            f" ({nonfinite} NaN/Inf field value(s) dropped, first at line {first_nonfinite})" if nonfinite else ""))
    notes = []
    if nonfinite:
        notes.append(f"{nonfinite} NaN/Inf field value(s) dropped, first at line {first_nonfinite}")
    if skipped:
        notes.append(f"{skipped} string or boolean field(s) skipped")
    return "; ".join(notes) or None


def looks_like_line_protocol(lines: list[bytes]) -> bool:
    """Whether the first lines read as line protocol (``name[,tags] k=v[,k=v] [ns]``)."""
    import re

    tok = rb'(?:\\.|"(?:[^"\\]|\\.)*"|[^ \\"])+'  # escapes and quoted strings may hold spaces
    pat = re.compile(rb"^[A-Za-z_](?:\\.|[^ ,\\])*(," + tok + rb")? " + tok + rb"=" + tok
                     + rb"( [0-9]{9,19})?\r?$")
    body = [ln for ln in lines[:20] if ln.strip() and not ln.lstrip().startswith(b"#")]
    # the first line and most of the rest: a bad line further down gets the parser's message
    return bool(body) and bool(pat.match(body[0])) and 2 * sum(bool(pat.match(ln)) for ln in body) > len(body)


__all__ = ["parse_line_protocol", "split_line", "looks_like_line_protocol", "NVIDIA_SMI_FIELDS"]
