"""What a count is expected to be at a time of day ahead, from the same time on past days of its kind.

The GPUs other work holds (other classes, the batch that does not recur, the pool's other
services) are not forecast one by one: their mean at the same time of day on past days of the
same kind (weekday or weekend, UTC) is what the pool is expected to have taken; and, where it
matters, their mean at the steps a run held GPUs and at the steps none did (the pool's other
services hold less while a run starves them).
"""

from __future__ import annotations

import numpy as np
import polars as pl

DAY_MS = 86_400_000
BIN_MS = 600_000  # ten minutes: the rhythm's resolution


def _kind(ts_ms: np.ndarray) -> np.ndarray:
    # 1970-01-01 was a Thursday; a step belongs to the day its start is in
    return ((np.asarray(ts_ms, np.int64) - 1) // DAY_MS + 3) % 7 >= 5


def _tod(ts_ms: np.ndarray) -> np.ndarray:
    return ((np.asarray(ts_ms, np.int64) - 1) % DAY_MS) // BIN_MS


def weekend(ts_ms: np.ndarray | int) -> np.ndarray:
    """Whether each step (its end ``ts_ms``) falls on a Saturday or Sunday, UTC.

    >>> monday = 1_791_158_400_000  # 2026-10-05 00:00 UTC
    >>> weekend(np.array([monday, monday + 60_000, monday + 5 * DAY_MS + 60_000])).tolist()  # Sun's last minute, Mon, Sat
    [True, False, True]
    """
    return _kind(np.atleast_1d(ts_ms))


def profile_ahead(ts_ms: np.ndarray, values: np.ndarray, ahead_ms: np.ndarray, *,
                  where: np.ndarray | None = None, fill: bool = True) -> np.ndarray:
    """Per step ahead, the mean of ``values`` at the same ten minutes of the day on past days of
    the same kind; the mean over all past days at that time where the kind was never seen, and 0
    where nothing was (NaN instead with ``fill=False``). ``where`` keeps only some past steps
    (the steps a run held GPUs: what others held then). A missing value is no value.

    >>> t = np.arange(1, 3 * 144 + 1) * BIN_MS  # Thursday to Saturday, 1970, in ten-minute steps
    >>> v = np.where(((t - 1) % DAY_MS) // BIN_MS < 72, 2.0, 6.0)
    >>> profile_ahead(t, v, np.array([t[-1] + BIN_MS, t[-1] + 100 * BIN_MS])).tolist()
    [2.0, 6.0]
    >>> profile_ahead(t, v, np.array([t[-1] + BIN_MS]), where=v > 3, fill=False).tolist()
    [nan]
    """
    ts = np.asarray(ts_ms, np.int64)
    ahead = np.asarray(ahead_ms, np.int64)
    v = np.asarray(values, float)
    keep = ~np.isnan(v) if where is None else (~np.isnan(v) & np.asarray(where, bool))
    ts, v = ts[keep], v[keep]
    if ts.size == 0 or ahead.size == 0:
        return np.zeros(ahead.size) if fill else np.full(ahead.size, np.nan)
    past = pl.DataFrame({"k": _kind(ts), "tod": _tod(ts), "v": v})
    by_kind = past.group_by("k", "tod").agg(pl.col("v").mean().alias("kv"))
    by_tod = past.group_by("tod").agg(pl.col("v").mean().alias("tv"))
    want = (pl.DataFrame({"k": _kind(ahead), "tod": _tod(ahead)}).with_row_index("i")
            .join(by_kind, on=["k", "tod"], how="left").join(by_tod, on="tod", how="left").sort("i"))
    got = want.select(pl.coalesce("kv", "tv"))["kv"].to_numpy().astype(float)
    return np.nan_to_num(got, nan=0.0) if fill else got
