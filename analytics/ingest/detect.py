"""Format detection from content (the extension only breaks ties).

Formats: ``prom-text`` (exposition 0.0.4), ``openmetrics``, ``prom-json`` (HTTP API responses),
``csv-long``, ``csv-grafana`` (series joined by time), ``nvidia-smi-csv`` and ``parquet-long``.
"""

from __future__ import annotations

import re
import zlib

from analytics.errors import IngestError
from analytics.ingest.sources import is_gzip

FORMATS: tuple[str, ...] = ("prom-text", "openmetrics", "prom-json", "csv-long", "csv-grafana",
                            "nvidia-smi-csv", "parquet-long")
EXPOSITION_FORMATS = ("prom-text", "openmetrics")

_SAMPLE_LINE = re.compile(rb"^[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*[ \t]*\{|[a-zA-Z_:][a-zA-Z0-9_:]*[ \t]+[-+0-9.NIn])")
_OM_MARKERS = re.compile(rb"^# (EOF|UNIT )", re.MULTILINE)
_NVSMI_FIELDS = ("utilization.gpu", "memory.used", "memory.total", "power.draw", "temperature.gpu",
                 "pci.bus_id", "clocks.sm", "utilization.memory", "driver_version")
TIME_COLUMNS = ("timestamp", "time", "ts", "ts_ms", "ts_s", "datetime", "date")
METRIC_COLUMNS = ("metric", "__name__", "metric_name", "name")
VALUE_COLUMNS = ("value", "val")


def csv_header(head: bytes) -> list[str]:
    """The first line of ``head`` split on commas, unquoted and stripped."""
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace").strip("\r")
    return [c.strip().strip('"').strip() for c in first.split(",")]


def _csv_kind(cols: list[str]) -> str | None:
    low = [c.lower() for c in cols]
    if any(c.split(" [")[0] in _NVSMI_FIELDS for c in low) or any(c.endswith(" [%]") or c.endswith(" [mib]")
                                                                  for c in low):
        return "nvidia-smi-csv"
    if any(c in METRIC_COLUMNS for c in low) and any(c in VALUE_COLUMNS for c in low) \
            and any(c in TIME_COLUMNS for c in low):
        return "csv-long"
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
        return "parquet-long"
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "prom-json"
    lines = [ln for ln in data[:1 << 16].split(b"\n")[:200] if ln.strip()]
    if not lines:
        raise IngestError(name or "<data>", "the file is empty")
    exposition = any(ln.startswith((b"# HELP ", b"# TYPE ")) for ln in lines) or \
        all(ln.startswith(b"#") or _SAMPLE_LINE.match(ln) for ln in lines[:50])
    if exposition:
        return "openmetrics" if _OM_MARKERS.search(data) else "prom-text"
    if b"," in lines[0]:
        kind = _csv_kind(csv_header(lines[0]))
        if kind:
            return kind
        raise IngestError(name or "<data>", "a CSV whose header names no known layout: expected a long "
                          "layout (timestamp, metric, value, label columns...), Grafana's 'series joined "
                          "by time' (Time, series...), or nvidia-smi --query-gpu --format=csv output; "
                          f"found header {','.join(csv_header(lines[0]))[:200]!r}", line=1)
    raise IngestError(name or "<data>", "unrecognised format: expected Prometheus text/OpenMetrics, "
                      "Prometheus API JSON, CSV (long, Grafana, nvidia-smi) or Parquet", line=1)


__all__ = ["detect_format", "FORMATS", "EXPOSITION_FORMATS"]
