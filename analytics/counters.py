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

import polars as pl

from analytics.sql import timeline as q

if TYPE_CHECKING:  # the config lives with the timelines, which import this module
    from analytics.store import Store
    from analytics.timeline import TimelineConfig

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
        row = store.con.execute(q.DATA_RANGE).fetchall()[0]
        if row[0] is None:
            return None
        start = row[0] if start is None else start
        end = row[1] if end is None else end
    if end < start:
        return None
    first_end = -(-start // step_ms) * step_ms
    last_end = -(-end // step_ms) * step_ms
    return step_ms, first_end - step_ms, last_end


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


def increase_by_group(store: "Store", groups: pl.DataFrame, step_ms: int, lo_ms: int,
                      hi_ms: int) -> pl.DataFrame:
    """Counter increases summed per group inside DuckDB.

    ``groups`` maps ``series_id -> group_id`` (Int64 both). Returns ``group_id, ts_end_ms,
    increase``.
    """
    if groups.height == 0:
        return pl.DataFrame(schema={"group_id": pl.Int64, "ts_end_ms": pl.Int64, "increase": pl.Float64})
    register_temp(store, "tl_counter_series",
                  groups.select(pl.col("series_id").cast(pl.Int64), pl.col("group_id").cast(pl.Int64)))
    return store.query(q.COUNTER_INCREASE_BY_GROUP, {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms,
                                                      "lookback_ms": LOOKBACK_MS,
                                                      "new_after_ms": NEW_SERIES_AFTER_MS})


def parse_le(le: str | None) -> float | None:
    """A bucket bound from its ``le`` label (``+Inf`` included); ``None`` when unreadable.

    >>> parse_le("+Inf"), parse_le("0.25"), parse_le("x")
    (inf, 0.25, None)
    """
    if le is None:
        return None
    try:
        return float(le)
    except ValueError:
        return None


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
