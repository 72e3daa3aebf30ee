"""Prometheus query semantics over the store: counter ``increase``/``rate`` per step and
``histogram_quantile``.

Counters (DESIGN.md "Contracts"): per series and step, the increase is the sum of the
non-negative deltas between consecutive samples whose later sample lies in the step; a drop
is a counter reset after which the new value counts as the increase. The previous sample may
lie in an earlier step, so increases over consecutive steps add up to the increase over the
whole range and one sample per step is enough (plain window-only ``increase()`` needs two
samples inside every window). No extrapolation is done. A series that starts inside the data
(its first sample at least :data:`NEW_SERIES_AFTER_MS` after the first sample of the series
asked for) counts from zero, so its first sample's value is its first increase: a pod that
starts serving, or a labelled histogram child that appears on its first observation (what
Prometheus' created-timestamp zero samples and VictoriaMetrics' ``increase`` do). A series
already present when the data begins has its first sample as its baseline.

``histogram_quantile`` follows Prometheus' ``promql/quantile.go``: buckets sorted by ``le``,
made monotonic, linear interpolation inside the bucket holding the rank (the first bucket
starting at 0), the highest finite bound when the rank falls in ``+Inf``, NaN when there is no
``+Inf`` bucket, fewer than two buckets, or no observations.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from analytics.sql import timeline as q
from analytics.store import plausible_window_ms

if TYPE_CHECKING:  # the config lives with the timelines, which import this module
    from analytics.store import Store
    from analytics.timeline.config import TimelineConfig

LOOKBACK_MS = 5 * 60_000  # Prometheus' default lookback delta: how far back a first step's baseline may lie
# A counter series whose first sample comes this long after the first of its peers is new
# (a pod that started, a histogram child on its first observation): it counts from zero.
NEW_SERIES_AFTER_MS = 60_000


def step_range(store: "Store", cfg: "TimelineConfig") -> tuple[int, int, int] | None:
    """The samples a timeline covers, as ``(step_ms, lo_ms, hi_ms)``: samples in ``(lo, hi]``.

    Steps are aligned to multiples of the step since the epoch; the first step is the one
    holding ``cfg.start_ms`` (default: the first sample), the last the one holding
    ``cfg.end_ms`` (default: the last sample). ``None`` when the store is empty.
    """
    step_ms = int(cfg.step_s) * 1000
    if step_ms <= 0:
        raise ValueError(f"step must be positive, got {cfg.step_s} s")
    start, end = cfg.start_ms, cfg.end_ms
    if start is None or end is None:

        row = store.data_range_ms(plausible_window_ms())
        if row[0] is None:
            return None
        start = row[0] if start is None else start
        end = row[1] if end is None else end
    if end < start:
        return None
    return step_ms, step_end(step_ms, start) - step_ms, step_end(step_ms, end)


def step_end(step_ms: int, ts_ms: int) -> int:
    """The end of the step holding ``ts_ms``: steps are ``(end - step, end]``, aligned to the epoch.

    >>> step_end(300_000, 1_000), step_end(300_000, 300_000), step_end(300_000, 300_001)
    (300000, 300000, 600000)
    """
    return -(-ts_ms // step_ms) * step_ms


def register_temp(store: "Store", name: str, frame: pl.DataFrame) -> None:
    """Materialise a small polars frame as a DuckDB temp table ``name`` (replacing it)."""
    view = f"{name}_in"
    store.con.register(view, frame)
    try:
        store.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {view}").fetchall()
    finally:
        store.con.unregister(view)


def _series_ids(store: "Store", metric_or_series_ids: str | Iterable[str] | Iterable[int]) -> list[int]:
    if isinstance(metric_or_series_ids, str):
        metric_or_series_ids = [metric_or_series_ids]
    items = list(metric_or_series_ids)
    if items and all(isinstance(i, str) for i in items):
        ids = store.query(q.SERIES_OF_METRICS, {"metrics": items})["series_id"]
        return [int(i) for i in ids]
    return [int(i) for i in items]


def _empty_increase() -> pl.DataFrame:
    return pl.DataFrame(schema={"series_id": pl.Int64, "ts": pl.Datetime("ms", "UTC"),
                                "increase": pl.Float64, "rate": pl.Float64})


def increase(store: "Store", metric_or_series_ids: str | Sequence[str] | Sequence[int],
             cfg: "TimelineConfig") -> pl.DataFrame:
    """Counter increase per series and step, and ``rate = increase / step_s``.

    Parameters
    ----------
    store:
        The store.
    metric_or_series_ids:
        A metric name, several names, or series ids.
    cfg:
        Step and range (see :class:`analytics.timeline.TimelineConfig`).

    Returns
    -------
    polars.DataFrame
        ``series_id, ts (end of step, UTC), increase, rate``; a step where the series has no
        sample has no row. Never negative.
    """
    ids = _series_ids(store, metric_or_series_ids)
    rng = step_range(store, cfg)
    if not ids or rng is None:
        return _empty_increase()
    step_ms, lo_ms, hi_ms = rng
    register_temp(store, "tl_counter_series", pl.DataFrame({"series_id": ids}, schema={"series_id": pl.Int64}))
    out = store.query(q.COUNTER_INCREASE, {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms,
                                           "lookback_ms": LOOKBACK_MS, "new_after_ms": NEW_SERIES_AFTER_MS})
    return out.select(
        pl.col("series_id").cast(pl.Int64),
        pl.col("ts_end_ms").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC").alias("ts"),
        pl.col("increase").cast(pl.Float64),
        (pl.col("increase") / cfg.step_s).alias("rate"))


def rate(store: "Store", metric_or_series_ids: str | Sequence[str] | Sequence[int],
         cfg: "TimelineConfig") -> pl.DataFrame:
    """Per-second rate per series and step: :func:`increase` divided by the step."""
    return increase(store, metric_or_series_ids, cfg).drop("increase")


# Samples fetched into numpy per chunk of series: bounds the memory of increase_by_group to
# about 10 arrays of this many values (~80 MB), whatever the range.
CHUNK_SAMPLES = 1_000_000
# Above this many (group, step) cells the per-chunk sums are kept sparse instead of dense.
DENSE_CELLS = 20_000_000


def increase_by_group(store: "Store", groups: pl.DataFrame, step_ms: int, lo_ms: int,
                      hi_ms: int) -> pl.DataFrame:
    """Counter increases summed per group.

    ``groups`` maps ``series_id -> group_id`` (Int64 both). Returns ``group_id, ts_end_ms,
    increase`` sorted by group and step: the sums of
    :data:`analytics.sql.timeline.COUNTER_INCREASE_BY_GROUP`, computed in numpy a chunk of
    series at a time (DuckDB's window ``lag`` over every sample costs more: 8.8M samples, about
    2.0 against 1.3 CPU-s, and a quarter of the memory of fetching them all at once).
    """
    empty = pl.DataFrame(schema={"group_id": pl.Int64, "ts_end_ms": pl.Int64, "increase": pl.Float64})
    if groups.height == 0:
        return empty
    groups = groups.select(pl.col("series_id").cast(pl.Int64), pl.col("group_id").cast(pl.Int64))
    register_temp(store, "tl_counter_series", groups)
    params = {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms, "lookback_ms": LOOKBACK_MS,
              "new_after_ms": NEW_SERIES_AFTER_MS}
    window = {k: params[k] for k in ("lo_ms", "hi_ms", "lookback_ms")}
    stats = store.query(q.COUNTER_SERIES_STATS, window)
    if stats.height == 0:
        return empty
    if stats["nulls"].sum() or groups["series_id"].is_duplicated().any():
        # NULL (not NaN) values (DuckDB's lag semantics), or a series in several groups: in SQL
        return store.query(q.COUNTER_INCREASE_BY_GROUP, params)
    stats = stats.join(groups.unique("series_id"), on="series_id").sort("series_id")
    min_first = int(stats["first_ms"].min())
    sums = _StepSums(step_ms, lo_ms, hi_ms, int(groups["group_id"].min()), int(groups["group_id"].max()))
    for lo_i, hi_i in _chunks(stats["n"].to_numpy()):
        part = stats[lo_i:hi_i]
        raw = store.query(q.COUNTER_SAMPLES, {**window, "first_id": int(part["series_id"][0]),
                                               "last_id": int(part["series_id"][-1])})
        if raw.height:
            sums.add(*_deltas(raw, part, min_first, step_ms, lo_ms))
    return sums.result()


def _chunks(counts: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive index ranges of series holding about :data:`CHUNK_SAMPLES` samples each."""
    out, start, total = [], 0, 0
    for i, n in enumerate(counts.tolist()):
        if total and total + n > CHUNK_SAMPLES:
            out.append((start, i))
            start, total = i, 0
        total += n
    out.append((start, len(counts)))
    return out


def _deltas(raw: pl.DataFrame, stats: pl.DataFrame, min_first: int, step_ms: int,
            lo_ms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each sample's delta (:data:`analytics.sql.timeline.COUNTER_INCREASE_BY_GROUP`'s ``_DELTA``)
    for the samples of the steps: ``(group_id, ts_end_ms, delta)``."""
    sid = raw["series_id"].to_numpy()
    ts = raw["ts_ms"].to_numpy()
    val = raw["value"].to_numpy()
    order = _series_time_order(sid, ts)
    if order is not None:
        sid, ts, val = sid[order], ts[order], val[order]
    # runs of one series; whatever is series-level (first sample time, group) is looked up per run
    starts = np.flatnonzero(np.concatenate(([True], sid[1:] != sid[:-1])))
    run = np.searchsorted(stats["series_id"].to_numpy(), sid[starts])  # stats is sorted by series
    run_first = stats["first_ms"].to_numpy()[run]
    # the sample at a series' first time over all data is the first of its run
    run_new = (ts[starts] == run_first) & (run_first >= min_first + NEW_SERIES_AFTER_MS)
    delta = np.empty_like(val)
    prev, cur = val[:-1], val[1:]
    with np.errstate(invalid="ignore"):
        # DuckDB orders NaN above every number: NaN >= x holds, x >= NaN does not
        rose = np.isnan(cur) | (~np.isnan(prev) & (cur >= prev))
        delta[1:] = np.where(rose, cur - prev, cur)
    delta[starts] = np.where(run_new, val[starts], 0.0)
    gid = np.repeat(stats["group_id"].to_numpy()[run], np.diff(np.append(starts, len(sid))))
    keep = ts > lo_ms
    ts_end = (ts[keep] + step_ms - 1) // step_ms * step_ms  # the step's end, as STEP_END
    return gid[keep], ts_end, delta[keep]


class _StepSums:
    """Sums of deltas per (group, step) over chunks: a dense matrix when small, else sparse."""

    def __init__(self, step_ms: int, lo_ms: int, hi_ms: int, g_lo: int, g_hi: int) -> None:
        self.step_ms, self.g_lo = step_ms, g_lo
        self.base = -(-(lo_ms + 1) // step_ms) * step_ms  # the first step's end
        self.n_steps = (-(-hi_ms // step_ms) * step_ms - self.base) // step_ms + 1
        cells = (g_hi - g_lo + 1) * self.n_steps
        self.dense = cells <= DENSE_CELLS
        if self.dense:
            self.total = np.zeros(cells)
            self.count = np.zeros(cells, dtype=np.int64)
        self.parts: list[pl.DataFrame] = []

    def add(self, gid: np.ndarray, ts_end: np.ndarray, delta: np.ndarray) -> None:
        if not len(gid):
            return
        if self.dense:
            key = (gid - self.g_lo) * self.n_steps + (ts_end - self.base) // self.step_ms
            self.total += np.bincount(key, weights=delta, minlength=len(self.total))
            self.count += np.bincount(key, minlength=len(self.count))
        else:
            self.parts.append(pl.DataFrame({"group_id": gid, "ts_end_ms": ts_end, "increase": delta})
                              .group_by("group_id", "ts_end_ms").agg(pl.col("increase").sum()))

    def result(self) -> pl.DataFrame:
        schema = {"group_id": pl.Int64, "ts_end_ms": pl.Int64, "increase": pl.Float64}
        if self.dense:
            seen = np.flatnonzero(self.count)
            return pl.DataFrame({"group_id": seen // self.n_steps + self.g_lo,
                                 "ts_end_ms": self.base + (seen % self.n_steps) * self.step_ms,
                                 "increase": self.total[seen]}, schema=schema)
        if not self.parts:
            return pl.DataFrame(schema=schema)
        return (pl.concat(self.parts).group_by("group_id", "ts_end_ms").agg(pl.col("increase").sum())
                .cast(schema).sort("group_id", "ts_end_ms"))


def _series_time_order(sid: np.ndarray, ts: np.ndarray) -> np.ndarray | None:
    """The permutation sorting samples by series then time; ``None`` when already so.

    Scans return a store's samples nearly in that order (runs broken where the scan's threads
    meet, or time-major for scrape archives): a stable sort on one packed key is a merge of a
    few runs there (14M samples: 0.15 CPU-s, against 0.7 for ``lexsort``).
    """
    t0, span = int(ts.min()), int(ts.max()) - int(ts.min()) + 1
    s0 = int(sid.min())
    if (int(sid.max()) - s0 + 1) * span >= 1 << 62:
        return np.lexsort((ts, sid))
    key = (sid - s0) * span + (ts - t0)
    if (np.diff(key) > 0).all():
        return None
    return np.argsort(key, kind="stable")


def _quantiles_dense(qs: Mapping[str, float], b: pl.DataFrame, grp: list[str]) -> pl.DataFrame | None:
    """:func:`histogram_quantiles` in numpy, one (groups x bounds) matrix per number of bounds
    (one histogram's buckets per service and step), for numeric group keys. Same arithmetic as
    the general path; 1.3M buckets: ~0.15 against ~1.2 CPU-s (most of it polars' multi-column sort).

    ``b`` has the group columns, ``_le`` and ``_v``, unsorted and possibly with repeated
    (group, bound) rows. Returns ``None`` (the caller takes the general path) for non-numeric,
    null or NaN keys, null counts, or more than 16 different bucket counts.
    """
    n = b.height
    if n == 0 or b["_v"].null_count():
        return None
    cols = []
    for k in grp:
        col = b[k]
        if not col.dtype.is_numeric() or col.null_count() or (col.dtype.is_float() and col.is_nan().any()):
            return None
        cols.append(col.to_numpy())
    le_all, v_all = b["_le"].to_numpy(), b["_v"].to_numpy()
    order = np.lexsort((le_all, *reversed(cols)))
    cols = [key[order] for key in cols]
    le_all, v_all = le_all[order], v_all[order]
    new_group = np.zeros(n, dtype=bool)
    new_group[0] = True
    for key in cols:
        new_group[1:] |= key[1:] != key[:-1]
    new_row = new_group.copy()
    new_row[1:] |= le_all[1:] != le_all[:-1]
    if not new_row.all():  # the same bound twice in a group (several pods' buckets): sum them
        at = np.flatnonzero(new_row)
        v_all = np.add.reduceat(v_all, at)
        le_all, new_group, cols = le_all[at], new_group[at], [key[at] for key in cols]
        n = len(at)
    starts = np.flatnonzero(new_group)
    widths = np.diff(np.append(starts, n))
    distinct = np.unique(widths)
    if len(distinct) > 16:  # many shapes: the general path is no slower
        return None
    out = pl.DataFrame({k: pl.Series(k, key[starts], dtype=b.schema[k]) for k, key in zip(grp, cols)})
    result = {name: np.full(len(starts), math.nan) for name in qs}
    for width in distinct:
        sel = np.flatnonzero(widths == width)
        at = starts[sel][:, None] + np.arange(width)
        for name, quant in _quantiles_matrix(qs, le_all[at], v_all[at]).items():
            result[name][sel] = quant
    return out.with_columns(*(pl.Series(name, result[name], dtype=pl.Float64) for name in qs))


def _quantiles_matrix(qs: Mapping[str, float], le: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """Quantiles of groups of equal width: ``le`` and ``v`` are (groups x bounds), bounds sorted."""
    width = le.shape[1]
    # Prometheus' ensureMonotonic: a lower count above a higher bound is raised to it.
    c = np.maximum.accumulate(np.where(np.isnan(v), 0.0, v), axis=1)
    pc = np.zeros_like(c)
    pc[:, 1:] = c[:, :-1]
    ple = np.full_like(le, np.nan)
    ple[:, 1:] = le[:, :-1]
    obs = c.max(axis=1)
    undefined = ~(le.max(axis=1) == math.inf) | (width < 2) | (obs == 0)
    rows = np.arange(le.shape[0])
    out = {}
    for name, q_ in qs.items():
        if math.isnan(q_) or q_ < 0 or q_ > 1:
            out[name] = np.full(le.shape[0], math.nan if math.isnan(q_) else (-math.inf if q_ < 0 else math.inf))
            continue
        rank = obs * q_
        reached = c >= rank[:, None]
        idx = reached.argmax(axis=1)  # the first bound whose count reaches the rank
        le_h, c_h, pc_h, ple_h = le[rows, idx], c[rows, idx], pc[rows, idx], ple[rows, idx]
        start = np.where(idx == 0, 0.0, ple_h)
        with np.errstate(invalid="ignore", divide="ignore"):
            interp = start + (le_h - start) * ((rank - pc_h) / (c_h - pc_h))
        quant = np.where(le_h == math.inf, ple_h, np.where((idx == 0) & (le_h <= 0), le_h, interp))
        quant[undefined | ~reached.any(axis=1)] = math.nan
        out[name] = quant
    return out


def histogram_quantile(q_: float, buckets: pl.DataFrame, *, le: str = "le",
                       value: str = "value") -> pl.DataFrame:
    """Prometheus ``histogram_quantile``, vectorised over groups.

    Parameters
    ----------
    q_:
        The quantile, 0..1 (below 0 gives -Inf, above 1 +Inf, as Prometheus does).
    buckets:
        Long frame of cumulative bucket counts (or rates): every column other than ``le`` and
        ``value`` is a group key. ``le`` is a float bound (``inf`` for ``+Inf``). Rows with the
        same group and bound are summed first (e.g. several pods' buckets).
    le, value:
        Column names of the bound and the count.

    Returns
    -------
    polars.DataFrame
        One row per group: the group keys and ``quantile`` (NaN where Prometheus gives NaN).

    Examples
    --------
    >>> b = pl.DataFrame({"g": ["a"] * 3, "le": [0.1, 0.2, float("inf")], "value": [50.0, 100.0, 100.0]})
    >>> round(histogram_quantile(0.75, b)["quantile"][0], 6)
    0.15
    """
    return histogram_quantiles({"quantile": q_}, buckets, le=le, value=value)


def histogram_quantiles(qs: Mapping[str, float], buckets: pl.DataFrame, *, le: str = "le",
                        value: str = "value") -> pl.DataFrame:
    """Several quantiles of the same buckets at once (one column per name in ``qs``), sharing
    the sorting and monotonic fix-up; otherwise as :func:`histogram_quantile`."""
    keys = [c for c in buckets.columns if c not in (le, value)]
    if buckets.height == 0:
        return pl.DataFrame(schema={**{k: buckets.schema[k] for k in keys}, **{n: pl.Float64 for n in qs}})
    grp = keys or ["_g"]
    b = buckets.select(*keys, pl.col(le).cast(pl.Float64).alias("_le"),
                       pl.col(value).cast(pl.Float64).alias("_v"))
    b = b.filter(pl.col("_le").is_not_null() & pl.col("_le").is_not_nan())
    if not keys:
        b = b.with_columns(pl.lit(0).alias("_g"))
    dense = _quantiles_dense(qs, b, grp)
    if dense is not None:
        return dense.drop("_g") if not keys else dense
    b = (b.group_by(*grp, "_le").agg(pl.col("_v").sum())
         .sort(*grp, "_le")
         # Prometheus' ensureMonotonic: a lower count above a higher bound is raised to it.
         .with_columns(pl.col("_v").fill_nan(0.0).cum_max().over(grp).alias("_c")))
    b = b.with_columns(
        pl.col("_c").shift(1).over(grp).fill_null(0.0).alias("_pc"),
        pl.col("_le").shift(1).over(grp).alias("_ple"),
        pl.len().over(grp).alias("_n"),
        (pl.col("_le").max().over(grp) == math.inf).alias("_has_inf"),
        pl.col("_c").max().over(grp).alias("_obs"))
    out = b.select(grp).unique(maintain_order=True)
    start = pl.col("_ple").fill_null(0.0)
    for name, q_ in qs.items():
        if math.isnan(q_) or q_ < 0 or q_ > 1:
            fixed = math.nan if math.isnan(q_) else (-math.inf if q_ < 0 else math.inf)
            out = out.with_columns(pl.lit(fixed, dtype=pl.Float64).alias(name))
            continue
        rank = pl.col("_obs") * q_
        # the first bucket whose cumulative count reaches the rank (the +Inf bucket always does);
        # rows are sorted by bound within each group, so the group's first hit is the lowest bound
        hit = (b.filter(pl.col("_c") >= rank)
               .group_by(grp, maintain_order=True).first())
        interp = start + (pl.col("_le") - start) * ((rank - pl.col("_pc")) / (pl.col("_c") - pl.col("_pc")))
        quant = (pl.when(~pl.col("_has_inf") | (pl.col("_n") < 2) | (pl.col("_obs") == 0)).then(math.nan)
                 .when(pl.col("_le") == math.inf).then(pl.col("_ple"))
                 .when(pl.col("_ple").is_null() & (pl.col("_le") <= 0)).then(pl.col("_le"))
                 .otherwise(interp))
        out = out.join(hit.select(*grp, quant.alias(name)), on=grp, how="left").with_columns(
            pl.col(name).fill_null(math.nan))
    if not keys:
        out = out.drop("_g")
    return out.sort(keys) if keys else out
