"""Format detection from content (the extension only breaks ties).

Formats: ``prom-text`` (exposition 0.0.4), ``openmetrics``, ``prom-json`` (HTTP API responses),
``csv-long``, ``csv-grafana`` (series joined by time), ``nvidia-smi-csv``, ``parquet-long``, and
per-request logs ``requests-csv | requests-jsonl | requests-parquet`` (a time and a latency column).
"""

from __future__ import annotations

import re
import zlib

from analytics.errors import IngestError
from analytics.ingest.lineprotocol import looks_like_line_protocol
from analytics.ingest.requests import detect_request_columns, header_columns, jsonl_keys, unitless_latency
from analytics.ingest.sources import csv_header, is_gzip
from analytics.times import epoch_unit

# Per-request logs (analytics.ingest.requests): one row per request, into the requests table.
REQUEST_FORMATS: tuple[str, ...] = ("requests-csv", "requests-jsonl", "requests-parquet")
FORMATS: tuple[str, ...] = ("prom-text", "openmetrics", "prom-json", "datadog-v1", "csv-long",
                            "csv-grafana", "nvidia-smi-csv", "parquet-long", "servegen-rate", "influx-lp",
                            *REQUEST_FORMATS)
# ServeGen's published client files: no header, `timestamp_s, rate_rps, cv, arrival_dist, p1, p2`.
_SERVEGEN_ROW = re.compile(rb"^\d+,[0-9.eE+-]+,[0-9.eE+-]*,[A-Za-z]*,[0-9.eE+-]*,[0-9.eE+-]*\r?$")
EXPOSITION_FORMATS = ("prom-text", "openmetrics")

_SAMPLE_LINE = re.compile(rb"^[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*[ \t]*\{|[a-zA-Z_:][a-zA-Z0-9_:]*[ \t]+[-+0-9.NIn])")
_OM_MARKERS = re.compile(rb"^# (EOF|UNIT )", re.MULTILINE)
_NVSMI_FIELDS = ("utilization.gpu", "memory.used", "memory.total", "power.draw", "temperature.gpu",
                 "pci.bus_id", "clocks.sm", "utilization.memory", "driver_version")
TIME_COLUMNS = ("timestamp", "time", "ts", "ts_ms", "ts_s", "datetime", "date")
METRIC_COLUMNS = ("metric", "__name__", "metric_name", "name")
VALUE_COLUMNS = ("value", "val")


def _csv_kind(cols: list[str]) -> str | None:
    low = [c.lower() for c in cols]
    if any(c.split(" [")[0] in _NVSMI_FIELDS for c in low) or any(c.endswith(" [%]") or c.endswith(" [mib]")
                                                                  for c in low):
        return "nvidia-smi-csv"
    if any(c in METRIC_COLUMNS for c in low) and any(c in VALUE_COLUMNS for c in low) \
            and any(c in TIME_COLUMNS for c in low):
        return "csv-long"

    # Grafana's "series joined by time" export starts with "Time": a panel of latency_ms is no request log
    grafana = cols[0] == "Time"
    if detect_request_columns(cols) is not None and not grafana:
        return "requests-csv"
    if unitless_latency(cols) and any(c in TIME_COLUMNS for c in low) and not grafana:
        return "requests-csv"  # its parser says which unit to name
    if len(cols) >= 2 and low[0] in TIME_COLUMNS:
        return "csv-grafana"
    return None


def detect_format(data: bytes, name: str = "") -> str:
    """Tell a source's format from its (possibly gzip-compressed) first bytes.

    Parameters
    ----------
    data:
        The content, or at least its first ~1 MB (and, for exposition text, its end helps: a
        ``# EOF`` line marks OpenMetrics).
    name:
        The file name, for messages and to break ties.

    Raises
    ------
    IngestError
        When no supported format matches.

    Examples
    --------
    >>> detect_format(b'# TYPE up gauge\\nup{job="a"} 1\\n')
    'prom-text'
    >>> detect_format(b'# TYPE up gauge\\nup 1\\n# EOF\\n')
    'openmetrics'
    """
    if is_gzip(data):  # only the head is needed: decompress at most 1 MB of it
        data = zlib.decompressobj(31).decompress(data, 1 << 20)
    if data[:4] == b"PAR1":
        return "parquet-long"  # a request log's columns are in its footer: see refine_format
    stripped = data.lstrip()
    if stripped[:1] == b"{" and b"\n{" in stripped[:1 << 20]:

        keys = jsonl_keys(stripped)
        if keys is not None and detect_request_columns(keys) is not None:
            return "requests-jsonl"
    if stripped[:1] in (b"{", b"["):
        # Datadog's /api/v1/query answers series[].pointlist; Prometheus data.result
        return "datadog-v1" if b'"pointlist"' in stripped[:1 << 20] and b'"series"' in stripped[:1 << 20] \
            else "prom-json"
    head = data[:1 << 16]
    pieces = head.split(b"\n")[:200]
    if len(data) > len(head) and len(pieces) > 1 and not head.endswith(b"\n"):
        pieces = pieces[:-1]  # a line cut by the slice (or one too long to judge) says nothing of the format
    lines = [ln for ln in pieces if ln.strip()]
    if not lines:
        raise IngestError(name or "<data>", "the file is empty")
    exposition = any(ln.startswith((b"# HELP ", b"# TYPE ")) for ln in lines) or \
        all(ln.startswith(b"#") or _SAMPLE_LINE.match(ln) for ln in lines[:50])
    if exposition:
        return exposition_flavour(data)[0]

    if looks_like_line_protocol(lines):
        return "influx-lp"
    head_rows = lines[:20]
    if lines[0].startswith(b"timestamp_s,rate_rps") or (  # a bad row further down: the parser names it
            _SERVEGEN_ROW.match(lines[0]) and 2 * sum(bool(_SERVEGEN_ROW.match(ln)) for ln in head_rows) > len(head_rows)):
        return "servegen-rate"
    if b"," in lines[0]:
        kind = _csv_kind(csv_header(lines[0]))
        if kind:
            return kind
        raise IngestError(name or "<data>", "a CSV whose header names no known layout: expected a long "
                          "layout (timestamp, metric, value, label columns...), Grafana's 'series joined "
                          "by time' (Time, series...), nvidia-smi --query-gpu --format=csv output, or a "
                          "request log (a time and a latency_ms / latency_s column; any other table: "
                          "tidelens ingest --columns mapping.toml); "
                          f"found header {','.join(csv_header(lines[0]))[:200]!r}", line=1)
    raise IngestError(name or "<data>", "unrecognised format: expected Prometheus text/OpenMetrics, "
                      "Prometheus API JSON, CSV (long, Grafana, nvidia-smi) or Parquet", line=1)


def refine_format(fmt: str, data: bytes, name: str = "") -> str:
    """The format once the whole source is at hand: a Parquet file with a request log's columns
    is ``requests-parquet`` (its schema is in the footer, which the head does not hold)."""
    if fmt != "parquet-long":
        return fmt

    try:
        cols = header_columns(data, name)
    except IngestError:
        return fmt  # the long-layout reader names what is wrong
    return "requests-parquet" if detect_request_columns(cols) is not None else fmt


_TS_TOKEN = re.compile(rb"(?:\}|\s)\s*[-+0-9.eEaNInf]+[ \t]+([-+]?[0-9][0-9.eE+-]*)[ \t]*\r?$")


def exposition_flavour(head: bytes, tail: bytes = b"") -> tuple[str, str | None]:
    r"""``prom-text`` or ``openmetrics`` for exposition text, and why when the markers were overruled.

    OpenMetrics marks itself (``# EOF`` at the end, ``# UNIT`` lines) and writes timestamps in
    seconds; text 0.0.4 writes integer milliseconds. One stray ``# EOF`` in a 0.0.4 file must not
    turn its milliseconds into seconds (year 58735), so the timestamps' magnitude decides where
    the file has any: 13-digit integers are 0.0.4 whatever the markers say, seconds (or fractions)
    are OpenMetrics.

    >>> exposition_flavour(b"up 1 1764316800000\n# EOF\n")
    ('prom-text', "timestamps are integer milliseconds (text 0.0.4), so the '# EOF' / '# UNIT' lines do not make it OpenMetrics")
    >>> exposition_flavour(b"up 1 1764316800.5\n# EOF\n")[0], exposition_flavour(b"up 1\n# EOF\n")[0]
    ('openmetrics', 'openmetrics')
    """
    marked = bool(_OM_MARKERS.search(head)) or b"\n# EOF" in b"\n" + tail
    stamps = []
    for line in head[:1 << 16].split(b"\n")[:400]:
        if line.startswith(b"#"):
            continue
        m = _TS_TOKEN.search(line)
        if m:
            try:
                stamps.append((m.group(1), abs(float(m.group(1)))))
            except ValueError:
                continue  # not a number ('1.1.1'): the parser refuses that line with its place
    if stamps:
        integral = all(b"." not in t and b"e" not in t.lower() for t, _ in stamps)
        big = max(v for _, v in stamps)
        if integral and epoch_unit(big) != "s":
            why = ("timestamps are integer milliseconds (text 0.0.4), so the '# EOF' / '# UNIT' lines do not "
                   "make it OpenMetrics") if marked else None
            return "prom-text", why
        if epoch_unit(big) == "s":
            return "openmetrics" if marked or not integral else "prom-text", None
    return ("openmetrics" if marked else "prom-text"), None


__all__ = ["detect_format", "exposition_flavour", "refine_format", "FORMATS", "EXPOSITION_FORMATS"]
