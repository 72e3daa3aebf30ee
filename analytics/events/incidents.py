"""Incident records: past postmortems' causes, loaded from CSV, to compare with what we find.

The CSV has a header with at least ``start, end, service, recorded_cause`` (ISO-8601 times,
UTC unless they carry an offset); other columns are kept. A recorded cause in free text is read
into the cause vocabulary by keywords (``user``, ``traffic``, ``surge`` ... -> ``traffic_surge``).
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from analytics.errors import IngestError
from analytics.events.config import CAUSES

REQUIRED = ("start", "end", "service", "recorded_cause")

_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("batch_contention", ("batch", "contention", "training", "fine-tune", "finetune", "gpu starv", "preempt")),
    ("scaling_lag", ("autoscal", "scaling", "warm-up", "warmup", "cold start", "hpa")),
    ("traffic_surge", ("user", "traffic", "surge", "load", "demand", "spike", "organic", "ramp", "behaviour",
                       "behavior", "noisy")),
)


def normalise_cause(text: str | None) -> str:
    """Map a recorded cause to the vocabulary.

    >>> normalise_cause("User behaviour (noisy morning tail)")
    'traffic_surge'
    >>> normalise_cause("batch_contention")
    'batch_contention'
    """
    t = (text or "").strip().lower()
    if t in CAUSES:
        return t
    for cause, words in _KEYWORDS:
        if any(w in t for w in words):
            return cause
    return "unexplained"


def load_incidents(path: str | Path, data: bytes | None = None) -> pl.DataFrame:
    """Read an incident CSV into ``start_ms, end_ms, service, recorded_cause, cause_class, ...extra``.

    ``data`` gives the file's bytes (an upload); ``path`` then only names it in messages.

    Raises
    ------
    IngestError
        Missing file or columns, or a time that does not parse (names the line).
    """
    p = Path(path)
    try:
        raw = pl.read_csv(io.BytesIO(data) if data is not None else p, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(p, f"cannot read incident CSV: {exc}") from exc
    raw = raw.rename({c: c.strip() for c in raw.columns})
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise IngestError(p, f"missing column(s) {', '.join(missing)}; the header needs "
                             f"{', '.join(REQUIRED)}", line=1)
    out = {}
    for col in ("start", "end"):
        parsed = raw[col].str.strip_chars().str.to_datetime(time_zone="UTC", strict=False)
        bad = (parsed.is_null() & raw[col].is_not_null()) | raw[col].is_null()
        if bad.any():
            i = int(bad.arg_true()[0])
            raise IngestError(p, f"{col} {raw[col][i]!r} is not an ISO-8601 time "
                                 f"(write e.g. 2026-03-02T09:30:00Z)", line=i + 2)
        out[col] = parsed.dt.epoch("ms")
    extra = [c for c in raw.columns if c not in REQUIRED]
    return pl.DataFrame({"start_ms": out["start"], "end_ms": out["end"], "service": raw["service"],
                         "recorded_cause": raw["recorded_cause"]}).with_columns(
        pl.col("recorded_cause").map_elements(normalise_cause, return_dtype=pl.Utf8).alias("cause_class"),
        *[raw[c] for c in extra])


def match_incident(incidents: pl.DataFrame | None, service: str, start_ms: int, end_ms: int) -> dict | None:
    """The incident of the same service overlapping ``[start_ms, end_ms)`` the most, if any."""
    if incidents is None or incidents.height == 0:
        return None
    m = incidents.filter((pl.col("service") == service) & (pl.col("start_ms") < end_ms)
                         & (pl.col("end_ms") > start_ms))
    if m.height == 0:
        return None
    m = m.with_columns((pl.min_horizontal(pl.col("end_ms"), pl.lit(end_ms))
                        - pl.max_horizontal(pl.col("start_ms"), pl.lit(start_ms))).alias("_ov"))
    return m.sort("_ov", descending=True).drop("_ov").row(0, named=True)
