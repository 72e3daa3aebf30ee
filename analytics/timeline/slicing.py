"""A part of a range's timelines, cut from the whole range's instead of built again.

Every timeline value is a function of its own step: samples in ``(ts - step, ts]``, counter
increases with their lookback before the step, the step grid aligned to the epoch; the one
decision that is not a step's own (whether a GPU is time-sliced) is taken over the store's
whole span. The steps of a sub-range are therefore the whole range's rows with ``ts`` in the
sub-range's grid: the app cuts a zoom from the range it has instead of reading the store again.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from analytics.timeline.combined import Timelines
from analytics.timeline.counters import step_end


def slice_timelines(whole: Timelines, step_s: int, start_ms: int | None,
                    end_ms: int | None) -> Timelines:
    """The timelines of ``[start_ms, end_ms]`` (``None``: open on that side) cut from those of a
    range that covers it, at the same step: equal to building them for the sub-range. The store's
    ``facts`` (whole-store, not per step) come along.

    >>> import datetime as dt
    >>> ts = [dt.datetime(2026, 1, 1, 0, m, tzinfo=dt.timezone.utc) for m in (1, 2, 3)]
    >>> frame = pl.DataFrame({"ts": ts, "gpus": [1.0, 2.0, 3.0]})
    >>> whole = Timelines(frame, frame.clear(), frame.clear())
    >>> t0 = int(ts[0].timestamp() * 1000)
    >>> slice_timelines(whole, 60, t0 + 1, None).pool["gpus"].to_list()  # from the 2nd step
    [2.0, 3.0]
    """
    step_ms = int(step_s) * 1000
    # The sub-range's steps as analytics.timeline.counters.step_range places them.
    lo = pl.lit(True) if start_ms is None else pl.col("ts") >= _ts(step_end(step_ms, start_ms))
    hi = pl.lit(True) if end_ms is None else pl.col("ts") <= _ts(step_end(step_ms, end_ms))
    # Equal to building the sub-range, so cached as the sub-range built: what the page computes
    # from a zoom, the CLI asked for that range reads.
    origin = (None if whole.origin is None
              else dataclasses.replace(whole.origin, start_ms=start_ms, end_ms=end_ms))
    return Timelines(whole.pool.filter(lo & hi), whole.holdings.filter(lo & hi),
                     whole.services.filter(lo & hi), whole.facts, origin)


def _ts(ms: int) -> pl.Expr:
    return pl.lit(ms).cast(pl.Datetime("ms")).dt.replace_time_zone("UTC")
