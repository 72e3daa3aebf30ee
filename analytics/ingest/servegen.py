"""ServeGen's published per-client rate files (``timestamp_s, rate_rps, cv, arrival_dist, p1,
p2``, no header) as an ingest format, and the trace's date and zone assumption.

ServeGen's timestamp 0 is local midnight of an unnamed day in an unnamed zone (the provider is
in UTC+8): the date, weekday and zone given here are assumptions, and :data:`ASSUMPTION_NOTE`
says so wherever a result from this trace is shown (the load note, the Rhythm).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from analytics.errors import IngestError
from analytics.times import parse_iso

SERVEGEN_ZONE = "Asia/Shanghai"
SERVEGEN_START_LOCAL = "2025-01-06"  # a Monday; the trace does not say which day it began
SERVEGEN_BIN_S = 600
ASSUMPTION_NOTE = ("ServeGen trace: timestamp 0 is local midnight of an unnamed day in an unnamed "
                   f"zone; assumed {SERVEGEN_START_LOCAL} (a Monday) in {SERVEGEN_ZONE} (UTC+8, the "
                   "provider's). Dates, weekdays and the zone are assumptions.")


SERVEGEN_METRIC = "request_rate"  # what the Rhythm reads as a traffic signal (a gauge, req/s)
_CHUNK = re.compile(r"chunk-(\d+)-trace", re.IGNORECASE)


def parse_servegen_chunk(data: bytes, sink: Any, source: str, *, start_local: str = SERVEGEN_START_LOCAL,
                         tz: str = SERVEGEN_ZONE, bin_s: int = SERVEGEN_BIN_S) -> str:
    """Load one ServeGen client file (headerless ``timestamp_s, rate_rps, cv, arrival_dist, p1,
    p2``, or the ``timestamp_s,rate_rps`` aggregate) as ``request_rate`` of its model (the folder's
    name) and client (the chunk's number): the Rhythm sums the clients per step, as
    the tests' independent reader (``tests/servegen_rate.py``) does. Returns the load note, which states the date/zone assumption.
    """
    import io

    import orjson


    text = data.decode("utf-8-sig", errors="replace")
    has_header = text.startswith("timestamp_s")
    try:
        raw = pl.read_csv(io.StringIO(text), has_header=has_header, infer_schema=False, truncate_ragged_lines=False)
    except pl.exceptions.PolarsError as exc:
        raise IngestError(source, f"not a ServeGen rate CSV: {exc}") from None
    raw = raw.select(raw.columns[:2])
    raw.columns = ["timestamp_s", "rate_rps"]
    first = 2 if has_header else 1
    for col, kind in (("timestamp_s", pl.Int64), ("rate_rps", pl.Float64)):
        bad = raw.with_row_index("i").filter(pl.col(col).cast(kind, strict=False).is_null())
        if bad.height:
            i = int(bad["i"][0])
            raise IngestError(source, f"column {col} must be {'integer seconds' if kind == pl.Int64 else 'a number'}; "
                              f"found {raw[col][i]!r}", line=first + i)
    path = Path(source)
    model = path.parent.name or "servegen"
    m = _CHUNK.search(path.name)
    client = m.group(1) if m else path.stem
    t0_ms = int(parse_iso(start_local, tz).timestamp() * 1000)
    sink.add_series(pl.DataFrame({"skey": [0], "metric": [SERVEGEN_METRIC],
                                  "labels": [orjson.dumps({"model": model, "client": client,
                                                           "source_format": "servegen"}).decode()]}))
    samples = raw.select(pl.lit(0, pl.Int64).alias("skey"),
                         ((pl.col("timestamp_s").cast(pl.Int64) + bin_s) * 1000 + t0_ms).alias("ts_ms"),
                         pl.col("rate_rps").cast(pl.Float64).alias("value"))
    sink.add_samples(samples, locate=lambda i: {"line": first + i})
    return f"ServeGen client {client} of {model}: {ASSUMPTION_NOTE}"
