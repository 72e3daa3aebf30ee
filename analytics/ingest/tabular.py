"""Tabular sources: long CSV/Parquet, Grafana's wide "series joined by time" CSV, nvidia-smi CSV logs.

All three become the same long shape ``(metric, labels..., ts_ms, value)``; distinct series are
found with polars and keyed once, so label strings are never repeated per sample in Python.
Times without a zone are taken as UTC (the contract), and the returned note says so.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.ingest.exposition_line import parse_series
from analytics.ingest.formats import METRIC_COLUMNS, TIME_COLUMNS, VALUE_COLUMNS
from analytics.ingest.sources import CHUNK_BYTES
from analytics.limits import IngestLimits
from analytics.signals import DCGM_FB_FREE, DCGM_FB_USED, DCGM_GPU_TEMP, DCGM_GPU_UTIL, DCGM_POWER, DCGM_SM_CLOCK
from analytics.sink import too_many_series
from analytics.store import Sink, check_plausible_times
from analytics.times import EPOCH_UNIT_MS, epoch_unit

# nvidia-smi --query-gpu field -> dcgm-exporter metric name (the mapping, plus obvious kin).
NVSMI_METRICS: dict[str, str] = {
    "utilization.gpu": DCGM_GPU_UTIL,
    "memory.used": DCGM_FB_USED,
    "memory.free": DCGM_FB_FREE,
    "power.draw": DCGM_POWER,
    "temperature.gpu": DCGM_GPU_TEMP,
    "clocks.sm": DCGM_SM_CLOCK,
    "clocks.current.sm": DCGM_SM_CLOCK,
    "utilization.memory": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "memory.total": "DCGM_FI_DEV_FB_TOTAL",
    "temperature.memory": "DCGM_FI_DEV_MEMORY_TEMP",
}
# nvidia-smi field -> label (dcgm-exporter spelling).
NVSMI_LABELS: dict[str, str] = {
    "uuid": "UUID", "gpu_uuid": "UUID", "index": "gpu", "name": "modelName", "gpu_name": "modelName",
    "pci.bus_id": "pci_bus_id", "gpu_bus_id": "pci_bus_id", "driver_version": "DCGM_FI_DRIVER_VERSION",
    "serial": "serial",
}
_NVSMI_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S%.f", "%Y/%m/%d %H:%M:%S")
_NOT_BLANK = re.compile(rb"[^ \t\r\n\x0b\x0c]")


def _pick(cols: list[str], wanted: tuple[str, ...]) -> str | None:
    low = {c.lower(): c for c in cols}
    for w in wanted:
        if w in low:
            return low[w]
    return None


def _names(cols: list[str], shown: int = 8) -> str:
    """A few of ``cols`` for a message, and how many more."""
    head = ", ".join(repr(c)[:40] for c in cols[:shown])
    return head + (f" … and {len(cols) - shown:,} more" if len(cols) > shown else "")


def to_ms(col: pl.Series, source: str, *, header_lines: int = 1) -> tuple[pl.Series, bool]:
    """Convert a time column (epoch s/ms/µs/ns by :func:`analytics.times.epoch_unit`, ISO-8601
    text or datetime) to UTC epoch ms.

    Returns the ms series and whether zone-less times were assumed to be UTC.
    """
    naive = False
    if col.dtype == pl.Datetime:
        naive = col.dtype.time_zone is None  # type: ignore[union-attr]
        out = col.dt.replace_time_zone("UTC") if naive else col.dt.convert_time_zone("UTC")
        return out.dt.epoch("ms"), naive
    if col.dtype == pl.Date:
        return col.cast(pl.Datetime("ms")).dt.epoch("ms"), True
    text, num = _as_numbers(col)
    if num.null_count() == text.null_count():
        finite = num.drop_nulls()
        big = finite.abs().max() if finite.len() else 0.0
        ms = (num * EPOCH_UNIT_MS[epoch_unit(big)]).round()
        over = (ms.abs() > 9.2e15).fill_null(False)  # no int64 millisecond holds it
        if over.any():
            row = int(over.arg_true()[0])
            raise IngestError(source, f"time {text[row]!r} is far outside any plausible time",
                              line=row + 1 + header_lines if header_lines else None,
                              where=None if header_lines else f"row {row}")
        return ms.cast(pl.Int64), False
    if num.drop_nulls().len() * 2 >= text.drop_nulls().len():  # mostly numbers: the others are wrong
        row = int((num.is_null() & text.is_not_null()).arg_true()[0])
        raise IngestError(source, f"unreadable time {text[row]!r}: expected epoch seconds/milliseconds like "
                          "the rows before it", line=row + 1 + header_lines)
    parsed = best = None
    for fmt in (None, *_NVSMI_TIME_FORMATS):
        try:
            cand = text.str.to_datetime(format=fmt, time_unit="ms", strict=False)
        except Exception:  # polars could not infer a format from the first values
            continue
        if cand.null_count() == text.null_count():
            parsed = cand
            break
        if best is None or cand.null_count() < best.null_count():
            best = cand
    if parsed is None:
        bad = (best.is_null() & text.is_not_null()).arg_true() if best is not None else pl.Series([0])
        row = int(bad[0]) if bad.len() else 0
        raise IngestError(source, f"unreadable time {text[row]!r}: use ISO-8601 (2026-01-01T00:00:00Z) or "
                          "epoch seconds/milliseconds", line=row + 1 + header_lines)
    if parsed.dtype.time_zone is None:  # type: ignore[union-attr]
        naive = True
        parsed = parsed.dt.replace_time_zone("UTC")
    else:
        parsed = parsed.dt.convert_time_zone("UTC")
    return parsed.dt.epoch("ms"), naive


def _as_numbers(col: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``(text, numbers)`` of a column: its text stripped of spaces only when some of it does not
    read as a number as it is (a stripped copy of every time and value of a 2-million-row CSV held
    60 MB each while the load went on)."""
    text = col.cast(pl.Utf8)
    num = text.cast(pl.Float64, strict=False)
    if num.null_count() != text.null_count():
        text = text.str.strip_chars()
        num = text.cast(pl.Float64, strict=False)
    return text, num


def _to_values(col: pl.Series, source: str, *, header_lines: int = 1, what: str = "value") -> pl.Series:
    if col.dtype.is_numeric():
        return col.cast(pl.Float64)
    text, vals = _as_numbers(col)
    bad = (vals.is_null() & text.is_not_null() & (text != "")).arg_true()
    if bad.len():
        row = int(bad[0])
        raise IngestError(source, f"{what} {text[row]!r} is not a number", line=row + 1 + header_lines)
    return vals


def labels_json(label_cols: list[str]) -> pl.Expr:
    """Each row's labels as a JSON object (a null or empty value left out, as Prometheus has it),
    built by polars: a Python string per series held 2 million series in 260 MB more.

    >>> pl.DataFrame({"gpu": ["0", None], "pod": ["p-1", ""]}).select(labels_json(["gpu", "pod"]))["labels"].to_list()
    ['{"gpu":"0","pod":"p-1"}', '{}']
    """
    # one label as '"name":"value"' (JSON-escaped by polars): a one-field object without its braces
    parts = [pl.when(pl.col(c).is_not_null() & (pl.col(c) != ""))
             .then(pl.struct(pl.col(c)).struct.json_encode().str.slice(1).str.head(-1)) for c in label_cols]
    inner = pl.concat_str(parts, separator=",", ignore_nulls=True) if parts else pl.lit("")
    return pl.concat_str(pl.lit("{"), inner.fill_null(""), pl.lit("}")).alias("labels")


def _write_long(frame: pl.DataFrame, label_cols: list[str], sink: Sink, source: str,
                header_lines: int = 1) -> None:
    """``frame`` has metric, ts_ms, value and the label columns; key series and write them.

    The series are counted before they are keyed: past the limit, refused naming the line of the
    first series past it (a CSV of 2.1 million series built every series first).
    """
    both = pl.col("value").is_not_null() & pl.col("ts_ms").is_not_null()
    if not frame.select(both.all()).item():
        frame = frame.filter(both)
    keys = ["metric", *label_cols]
    limit = IngestLimits.from_env().max_series
    # counted on a hash of each row's key (a hash two keys share counts them once: never a refusal
    # too many); a CSV of 2.1M series was refused at 833 MiB so, 1,303 counting the keys themselves
    first = frame.select(keys).hash_rows().is_first_distinct()
    if first.sum() > limit:
        row = int(first.arg_true()[limit])
        raise too_many_series(source, limit, row + 1 + header_lines if header_lines else None)
    # each series at its first row, found by the hash; a key whose hash another key took first
    # finds no series below, and the exact (costlier) unique keys are taken instead
    uniq = frame.select(keys).filter(first).with_row_index("skey")
    skey = _skeys(frame, uniq, keys)
    if skey.null_count():
        uniq = frame.select(keys).unique(maintain_order=True).with_row_index("skey")
        skey = _skeys(frame, uniq, keys)
    sink.add_series(uniq.select(pl.col("skey").cast(pl.Int64), "metric", labels_json(label_cols)))
    sink.add_samples(frame.select(skey, "ts_ms", "value"))


def _skeys(frame: pl.DataFrame, uniq: pl.DataFrame, keys: list[str]) -> pl.Series:
    """Each row's ``skey``: its key's row in ``uniq`` (null where ``uniq`` lacks its key)."""
    return (frame.lazy().select(keys).join(uniq.lazy(), on=keys, how="left", nulls_equal=True, maintain_order="left")
            .select(pl.col("skey").cast(pl.Int64)).collect().to_series())


def parse_long(frame: pl.DataFrame, sink: Sink, source: str, *, header_lines: int = 1) -> str | None:
    """Long layout: a time column, a metric column, a value column; every other column is a label."""
    cols = frame.columns
    tcol, mcol, vcol = _pick(cols, TIME_COLUMNS), _pick(cols, METRIC_COLUMNS), _pick(cols, VALUE_COLUMNS)
    missing = [n for n, c in (("timestamp", tcol), ("metric", mcol), ("value", vcol)) if c is None]
    if missing:
        raise IngestError(source, f"long layout needs columns {', '.join(missing)}; found {_names(cols)}",
                          line=1 if header_lines else None)
    for what, col in (("timestamp", tcol), ("value", vcol)):
        # The long layout has one sample per row: a row without its time or value is a broken
        # export, not a blank to skip (Grafana's wide layout, with legitimate blanks, is elsewhere).
        c = pl.col(col)  # type: ignore[arg-type]
        blank = c.is_null() | c.str.contains(r"^\s*$") if frame.schema[col] == pl.Utf8 else c.is_null()  # type: ignore[index]
        empty = frame.select(blank.arg_true()).to_series()
        if empty.len():
            row = int(empty[0])
            raise IngestError(source, f"no {what} on this row ({empty.len()} row(s) like it): the long "
                              "layout needs timestamp, metric and value on every row",
                              line=row + 1 + header_lines if header_lines else None,
                              where=None if header_lines else f"row {row}")
    ts, naive = to_ms(frame[tcol], source, header_lines=header_lines)  # type: ignore[index]
    check_plausible_times(ts, source, (lambda i: {"line": i + 1 + header_lines}) if header_lines
                          else (lambda i: {"where": f"row {i}"}))
    label_cols = [c for c in cols if c not in (tcol, mcol, vcol)]
    long = frame.select(
        pl.col(mcol).cast(pl.Utf8).alias("metric"),
        *[pl.col(c).cast(pl.Utf8) for c in label_cols]).with_columns(
        ts_ms=ts, value=_to_values(frame[vcol], source, header_lines=header_lines))  # type: ignore[index]
    empty_name = long["metric"].is_null() | (long["metric"].str.strip_chars() == "")
    if empty_name.any():
        row = int(empty_name.arg_true()[0])
        raise IngestError(source, "empty metric name", line=row + 1 + header_lines if header_lines else None,
                          where=None if header_lines else f"row {row}")
    _write_long(long, label_cols, sink, source, header_lines)
    return "times without a zone taken as UTC" if naive else None


def ragged_line(data: bytes, width: int) -> tuple[int, int] | None:
    r"""``(line, fields)`` of the first non-blank line whose field count is not ``width``, or None.

    Without quotes below the header (Grafana quotes only its header cells) the count is one more
    than the commas on the line (vectorised); otherwise Python's csv module reads the file (a
    quoted comma or newline is not a separator).

    >>> ragged_line(b"a,b,c\n1,2,3\n4,5\n", 3), ragged_line(b'a,b\n"x,y",2\n', 2)
    ((3, 2), None)
    >>> ragged_line(b'"Time","a,b"\n1,2\n3\n', 2)
    (3, 1)
    """
    start = data.find(b"\n") + 1
    if not start:
        return None  # a header alone: nothing to count
    if data.find(b'"', start) < 0:
        return _ragged_unquoted(data, start, width)
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=""))
    for row in reader:
        if row and len(row) != width:
            return reader.line_num, len(row)
    return None


def _ragged_unquoted(data: bytes, start: int, width: int) -> tuple[int, int] | None:
    """:func:`ragged_line` of a body without quotes (from byte ``start``): each line's commas
    counted by numpy over slices of the bytes themselves, never copied (a copy of the body and a
    frame of its lines took 416 MB of a 157 MB CSV); a line of nothing but ``\\r`` is blank."""
    if _NOT_BLANK.search(data, start) is None:
        return None  # whitespace after the header: nothing to count
    whole = np.frombuffer(data, dtype=np.uint8)
    line, pos, n = 2, start, len(data)
    while pos < n:
        end = min(n, pos + CHUNK_BYTES)
        if end < n:
            cut = data.rfind(b"\n", pos, end)
            end = cut + 1 if cut >= 0 else (data.find(b"\n", end) + 1 or n)
        piece = whole[pos:end]
        newlines = np.flatnonzero(piece == 10)
        ends = newlines if piece[-1] == 10 else np.append(newlines, len(piece))
        starts = np.concatenate(([0], ends[:-1] + 1))
        fields = _count_per_line(piece, ord(","), starts, ends) + 1
        blank = _count_per_line(piece, ord("\r"), starts, ends) == ends - starts
        bad = np.flatnonzero(~blank & (fields != width))
        if len(bad):
            return line + int(bad[0]), int(fields[bad[0]])
        line += len(ends)
        pos = end
    return None


def _count_per_line(piece: np.ndarray, byte: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many ``byte`` each line ``[starts, ends)`` of ``piece`` holds."""
    at = np.flatnonzero(piece == byte)
    return np.searchsorted(at, ends) - np.searchsorted(at, starts)


def _ragged_error(source: str, data: bytes, width: int) -> IngestError | None:
    found = ragged_line(data, width)
    if found is None:
        return None
    line, n = found
    what = "a value or label missing" if n < width else "a stray separator or an unquoted comma"
    return IngestError(source, f"this row has {n} field(s) where the header has {width} ({what}): "
                       "fix the export so every row has one field per header column", line=line)


def check_parquet_width(data: bytes, source: str) -> None:
    """Refuse a Parquet file with more columns than the limits allow, from its footer's schema alone."""

    limit = IngestLimits.from_env().max_columns
    try:
        columns = len(pl.read_parquet_schema(io.BytesIO(data)))
    except Exception as exc:  # polars' own error names the damage
        raise IngestError(source, f"unreadable Parquet: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
    if columns > limit:
        raise IngestError(source, f"{columns:,} columns, more than {limit:,} in one table: refused before reading "
                          "the rows; raise TIDELENS_MAX_COLUMNS if it is real", where="schema")


def check_header_width(data: bytes, source: str) -> None:
    """Refuse a CSV whose header has more columns than the limits allow, before any row is parsed
    (a one-row CSV of 3 million columns took 22.9 s and 3.4 GB to refuse before; this counts the
    header's separators, a quoted comma counted too, in C).

    >>> check_header_width(b"a,b\\n1,2\\n", "x.csv")
    """

    limit = IngestLimits.from_env().max_columns
    end = data.find(b"\n")
    columns = data.count(b",", 0, end if end >= 0 else len(data)) + 1
    if columns > limit:
        raise IngestError(source, f"a header of {columns:,} columns, more than {limit:,} in one table: refused "
                          "before reading the rows; raise TIDELENS_MAX_COLUMNS if it is real", line=1)


def read_csv_text(data: bytes, source: str) -> pl.DataFrame:
    """Every column as text; header cells unquoted the CSV way (polars keeps ``""`` in headers).

    A row with more or fewer fields than the header is refused with its line (polars would fill
    a short row with nulls, and name no line for a long one).
    """
    check_header_width(data, source)
    try:
        frame = pl.read_csv(io.BytesIO(data), infer_schema=False, truncate_ragged_lines=False)
    except Exception as exc:  # polars names the line in some messages; find it for the others
        m = re.search(r"line (\d+)", str(exc))
        if m is None and "more fields" in str(exc):
            width = len(next(csv.reader([data.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace")]), []))
            ragged = _ragged_error(source, data, width)
            if ragged is not None:
                raise ragged from None
        raise IngestError(source, f"unreadable CSV: {str(exc).splitlines()[0]}",
                          line=int(m.group(1)) if m else None) from None
    ragged = _ragged_error(source, data, frame.width)
    if ragged is not None:
        raise ragged
    end = data.find(b"\n")
    first = (data if end < 0 else data[:end]).decode("utf-8-sig", errors="replace").rstrip("\r")
    if '""' in first:
        header = next(csv.reader([first]))
        if len(header) == frame.width and len(set(header)) == len(header):
            frame.columns = header
    return frame


def parse_csv_long(data: bytes, sink: Sink, source: str) -> str | None:
    return parse_long(read_csv_text(data, source), sink, source)


def parse_parquet_long(data: bytes, sink: Sink, source: str) -> str | None:
    check_parquet_width(data, source)
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:
        raise IngestError(source, f"unreadable Parquet: {exc}") from None
    return parse_long(frame, sink, source, header_lines=0)


def _grafana_series(header: str, default_metric: str) -> tuple[str, dict[str, str]]:
    try:
        name, labels = parse_series(header)
        return name, labels
    except ValueError:
        pass
    if header.startswith("{") and header.endswith("}"):
        try:
            name, labels = parse_series(default_metric + header)
            return name, labels
        except ValueError:
            pass
    return header, {}


def parse_csv_grafana(data: bytes, sink: Sink, source: str, *, default_metric: str = "value") -> str | None:
    """Grafana "series joined by time": a Time column, then one column per series (its legend)."""
    frame = read_csv_text(data, source)
    tcol = frame.columns[0]
    ts, naive = to_ms(frame[tcol], source)
    check_plausible_times(ts, source, lambda i: {"line": i + 2})
    series_rows = []
    parts = []
    for skey, col in enumerate(frame.columns[1:]):
        name, labels = _grafana_series(col, default_metric)
        series_rows.append((skey, name, orjson.dumps(labels).decode()))
        vals = _to_values(frame[col], source, what=f"value of {col!r}")
        parts.append(pl.DataFrame({"skey": pl.Series([skey] * frame.height, dtype=pl.Int64), "ts_ms": ts,
                                   "value": vals, "row": pl.int_range(0, frame.height, eager=True)}))
    if not series_rows:
        raise IngestError(source, "no series columns after the time column", line=1)
    sk, nm, lb = zip(*series_rows)
    sink.add_series(pl.DataFrame({"skey": list(sk), "metric": list(nm), "labels": list(lb)},
                                 schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))
    long = pl.concat(parts).sort("row", "skey").filter(pl.col("value").is_not_null() & pl.col("ts_ms").is_not_null())
    sink.add_samples(long.select("skey", "ts_ms", "value"))
    return "times without a zone taken as UTC" if naive else None


def _nvsmi_field(header: str) -> str:
    return header.split(" [")[0].strip().lower()


def parse_nvidia_smi(data: bytes, sink: Sink, source: str) -> str | None:
    """``nvidia-smi --query-gpu=... --format=csv`` logs: units stripped, names mapped to dcgm-exporter's."""
    frame = read_csv_text(data, source)
    frame = frame.rename({c: c.strip() for c in frame.columns}).with_columns(pl.all().str.strip_chars())
    fields = {c: _nvsmi_field(c) for c in frame.columns}
    tcol = next((c for c, f in fields.items() if f == "timestamp"), None)
    if tcol is None:
        raise IngestError(source, "nvidia-smi CSV without a timestamp column: add 'timestamp' to --query-gpu",
                          line=1)
    ts, _ = to_ms(frame[tcol], source)
    label_cols = [c for c, f in fields.items() if f in NVSMI_LABELS]
    labels = frame.select([pl.col(c).alias(NVSMI_LABELS[fields[c]]) for c in label_cols])
    label_names = labels.columns
    longs = []
    for c, f in fields.items():
        if c == tcol or c in label_cols:
            continue
        # "45 %", "1234 MiB", "70.50 W"; "[N/A]" and "[Not Supported]" are missing
        text = frame[c].str.split(" ").list.first()
        vals = text.cast(pl.Float64, strict=False)
        missing = text.is_null() | text.str.starts_with("[") | text.str.to_uppercase().is_in(["N/A", ""])
        if (vals.is_not_null() | missing).all() is False or vals.is_not_null().sum() == 0:
            continue  # a text field (pstate, driver model...): not a metric
        metric = NVSMI_METRICS.get(f, "nvidia_smi_" + re.sub(r"[^a-zA-Z0-9_]", "_", f))
        longs.append(labels.with_columns(metric=pl.lit(metric), ts_ms=ts, value=vals))
    if not longs:
        raise IngestError(source, "no numeric nvidia-smi fields (utilization.gpu, memory.used, power.draw...)",
                          line=1)
    long = pl.concat(longs).select("metric", *label_names, "ts_ms", "value")
    _write_long(long, label_names, sink, source, header_lines=0)
    return "nvidia-smi local times taken as UTC"
