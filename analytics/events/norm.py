"""Normal traffic T0 per service: the norm band's expected value, lower and upper bounds.

Uses :func:`analytics.rhythm.norm_band` (MSTL, residual-quantile band) when the range holds
enough days for it; otherwise a plain stand-in: the median of the same minute of day over every day of the range, with a band of
three robust standard deviations (MAD x 1.4826), at least 10% of the expected value. A ramp
that happens every day is the norm; a surge is traffic above the band.
"""

from __future__ import annotations

import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.rhythm import norm_band

_DAY_MS = 86_400_000


def traffic_norm(frame: pl.DataFrame, *, step_s: int) -> pl.DataFrame:
    """Norm band of ``rps`` for one service's frame ``(ts_ms, rps)``.

    Returns
    -------
    pl.DataFrame
        ``ts_ms, expected, lower, upper`` on the frame's steps.
    """
    band = _rhythm_band(frame, step_s=step_s)
    if band is not None:
        return band
    return standin_norm(frame)


def standin_norm(frame: pl.DataFrame) -> pl.DataFrame:
    """Median by time of day over all days, with a robust band (see module docstring)."""
    f = frame.select("ts_ms", pl.col("rps").cast(pl.Float64)).with_columns(
        (pl.col("ts_ms") % _DAY_MS).alias("tod"))
    prof = f.group_by("tod").agg(pl.col("rps").median().alias("expected"))
    f = f.join(prof, on="tod", how="left").with_columns((pl.col("rps") - pl.col("expected")).abs().alias("dev"))
    mad = f.group_by("tod").agg((pl.col("dev").median() * 1.4826).alias("sigma"))
    out = f.join(mad, on="tod", how="left").with_columns(
        pl.max_horizontal(3 * pl.col("sigma"), 0.1 * pl.col("expected")).alias("half"))
    return out.select("ts_ms", "expected", (pl.col("expected") - pl.col("half")).clip(lower_bound=0).alias("lower"),
                      (pl.col("expected") + pl.col("half")).alias("upper")).sort("ts_ms")


def _rhythm_band(frame: pl.DataFrame, *, step_s: int) -> pl.DataFrame | None:
    src = frame.select(pl.col("ts_ms").cast(pl.Datetime("ms", "UTC")).alias("ts"), pl.col("rps").cast(pl.Float64))
    try:
        band = norm_band(src, "rps")
    except NotEnoughDataError:
        return None  # under ~2 days: the stand-in's same-time-of-day median is all there is
    return band.select(pl.col("ts").dt.epoch("ms").alias("ts_ms"), "expected",
                       pl.col("lower").clip(lower_bound=0), "upper")
