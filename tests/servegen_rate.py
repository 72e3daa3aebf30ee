"""An independent reader of Alibaba ServeGen rate traces (``timestamp_s, rate_rps, ...``) as a traffic
timeline: what the tests check the ingest path (:mod:`analytics.ingest.servegen`) against.

ServeGen's timestamp 0 is local midnight of an unnamed day in an unnamed zone (the provider is
in UTC+8): the date, weekday and zone given here are assumptions, and :data:`analytics.ingest.servegen.ASSUMPTION_NOTE`
says so wherever a result from this trace is shown
(the constants and the ingest format live in :mod:`analytics.ingest.servegen`).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analytics.errors import IngestError
from analytics.ingest.servegen import SERVEGEN_BIN_S, SERVEGEN_START_LOCAL, SERVEGEN_ZONE
from analytics.times import parse_iso


def read_servegen_rate(path: str | Path, *, start_local: str = SERVEGEN_START_LOCAL,
                       tz: str = SERVEGEN_ZONE, bin_s: int = SERVEGEN_BIN_S) -> pl.DataFrame:
    """Sum ``rate_rps`` per timestamp over one or more ServeGen CSVs: ``ts`` (bin end, UTC), ``rps``.

    Accepts the raw per-client chunk files (no header, six columns) or an aggregate with a
    ``timestamp_s,rate_rps`` header.
    """
    paths = sorted(Path(path).glob("chunk-*-trace.csv")) if Path(path).is_dir() else [Path(path)]
    if not paths:
        raise IngestError(path, "no chunk-*-trace.csv files here: point at a ServeGen trace folder "
                                "or an aggregate CSV with columns timestamp_s,rate_rps")
    parts = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            first = fh.readline()
        has_header = first.startswith("timestamp_s")
        try:
            raw = pl.read_csv(p, has_header=has_header, infer_schema=False)
        except pl.exceptions.PolarsError as exc:
            raise IngestError(p, f"not a ServeGen rate CSV: {exc}") from exc
        raw = raw.select(raw.columns[:2])
        raw.columns = ["timestamp_s", "rate_rps"]
        try:
            parts.append(raw.select(pl.col("timestamp_s").cast(pl.Int64), pl.col("rate_rps").cast(pl.Float64)))
        except pl.exceptions.PolarsError as exc:
            raise IngestError(p, "the first two columns must be timestamp_s (integer seconds) and "
                                 f"rate_rps (number): {exc}", line=2 if has_header else 1) from exc
    t0_ms = int(parse_iso(start_local, tz).timestamp() * 1000)
    return (pl.concat(parts).group_by("timestamp_s").agg(pl.col("rate_rps").sum().alias("rps"))
            .sort("timestamp_s")
            .select(((pl.col("timestamp_s") + bin_s) * 1000 + t0_ms).cast(pl.Datetime("ms", "UTC")).alias("ts"),
                    "rps"))

