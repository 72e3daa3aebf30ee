"""The pool's story at a glance: KPIs and chart-ready frames from the timelines.

Owns the Overview page's arithmetic: pool size, mean allocation and activity, minutes in which
a service's p99 broke its SLO, the share of GPU-hours by workload class and by team, and which
signals the store has. Inputs are the frames of :mod:`analytics.timeline` (``pool_timeline``,
``holdings``, ``service_timeline``); nothing here reads the store's tables directly.

Conventions: a step's ``ts`` is its end; GPU-hours are :func:`analytics.measures.gpu_hours`.
Missing values (nulls) are left out, never taken as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

import polars as pl

from analytics.measures import (
    gpu_hours,
    gpu_hours_expr,
    minutes_over_slo_any,
    minutes_over_slo_by_service,
    over_slo_expr,
    pool_size,
)
from analytics.signals import SIGNALS
from analytics.slo import SloTable
from analytics.timeline.config import CLASS_COLUMNS as POOL_CLASSES
from analytics.times import format_span
from analytics.units import minutes_text, span_text

# GPU classes in the order every chart stacks them (bottom to top) and every legend lists them:
# the pool timeline's own list (one definition).
WORKLOAD_CLASSES: tuple[str, ...] = POOL_CLASSES
HELD_CLASSES: tuple[str, ...] = ("inference", "batch", "other")
CLASS_COLUMNS: dict[str, str] = {c: f"gpus_{c}" for c in WORKLOAD_CLASSES}


@dataclass
class OverviewSummary:
    """The KPIs of one range of one store; shares are 0-1, percentages 0-100."""

    steps: int
    step_s: int
    pool_gpus_max: float
    pool_gpus_mean: float
    allocation_pct: float | None
    activity_pct: float | None
    gpu_hours: float
    slo_violation_min: float
    slo_violation_min_by_service: dict[str, float] = field(default_factory=dict)
    class_share: pl.DataFrame = field(default_factory=pl.DataFrame)
    team_share: pl.DataFrame = field(default_factory=pl.DataFrame)
    classes: pl.DataFrame = field(default_factory=pl.DataFrame)  # class_long: ts, cls, gpus
    violations: pl.DataFrame = field(default_factory=pl.DataFrame)  # slo_violations: ts, service, p99_ms, slo_ms, violating

    @property
    def gpu_hours_by_class(self) -> dict[str, float]:
        """GPU-hours of each class in :data:`WORKLOAD_CLASSES` order (idle included; 0 if absent)."""
        got = dict(self.class_share.select("cls", "gpu_hours").iter_rows()) if self.class_share.height else {}
        return {c: float(got.get(c, 0.0)) for c in WORKLOAD_CLASSES}

    @property
    def span_h(self) -> float:
        """The hours the range's steps cover."""
        return self.steps * self.step_s / 3600


def _per_step_totals(pool: pl.DataFrame) -> pl.DataFrame:
    """Sum the pools of each step: the fleet the overview talks about."""
    cols = [c for c in ("gpus_total", *CLASS_COLUMNS.values()) if c in pool.columns]
    return pool.group_by("ts").agg(pl.col(c).sum() for c in cols).sort("ts")


def class_gpu_hours(pool: pl.DataFrame, step_s: int) -> pl.DataFrame:
    """GPU-hours and share of the pool's GPU-hours per workload class.

    Returns ``cls, gpu_hours, share`` in :data:`WORKLOAD_CLASSES` order; a class the
    timeline lacks has 0.
    """
    total = gpu_hours(pool["gpus_total"].to_numpy(), step_s=step_s) if pool.height else 0.0
    rows = []
    for cls, col in CLASS_COLUMNS.items():
        gh = gpu_hours(pool[col].to_numpy(), step_s=step_s) if col in pool.columns and pool.height else 0.0
        rows.append({"cls": cls, "gpu_hours": gh, "share": gh / total if total > 0 else 0.0})
    return pl.DataFrame(rows, schema={"cls": pl.Utf8, "gpu_hours": pl.Float64, "share": pl.Float64})


def team_gpu_hours(holdings: pl.DataFrame, step_s: int, pool_gpu_hours: float) -> pl.DataFrame:
    """GPU-hours per team and its share of all the pool's GPU-hours (idle included).

    Returns ``team, cls, gpu_hours, share`` with the largest holder first; ``cls`` is the
    class the team held most.
    """
    schema = {"team": pl.Utf8, "cls": pl.Utf8, "gpu_hours": pl.Float64, "share": pl.Float64}
    if holdings.height == 0:
        return pl.DataFrame(schema=schema)
    by = (holdings.filter(pl.col("cls").is_in(HELD_CLASSES))
          .with_columns(pl.col("team").fill_null("(none)"))
          .group_by("team", "cls").agg(gpu_hours_expr("gpus", step_s=step_s).alias("gpu_hours")))
    out = (by.group_by("team")
           .agg(pl.col("gpu_hours").sum(), pl.col("cls").sort_by("gpu_hours").last())
           .with_columns((pl.col("gpu_hours") / pool_gpu_hours if pool_gpu_hours > 0
                          else pl.lit(0.0)).alias("share"))
           .sort(["gpu_hours", "team"], descending=[True, False]))
    return out.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def slo_violations(services: pl.DataFrame, slos: SloTable, step_s: int) -> pl.DataFrame:
    """Steps where a service's p99 was above its SLO: ``ts, service, p99_ms, slo_ms, violating``.

    The one definition of minutes over the SLO (:mod:`analytics.measures`): a step without a p99
    (no traffic, no histogram) is not violating: it is unknown.
    """
    if services.height == 0:
        return pl.DataFrame(schema={"ts": pl.Int64, "service": pl.Utf8, "p99_ms": pl.Float64,
                                    "slo_ms": pl.Float64, "violating": pl.Boolean})
    names = services["service"].unique().to_list()
    slo = pl.DataFrame({"service": names, "slo_ms": [slos.ms(n) for n in names]},
                       schema={"service": services.schema["service"], "slo_ms": pl.Float64})
    per = (services.group_by("ts", "service").agg(pl.col("p99_ms").max())
           .join(slo, on="service", how="left")
           .with_columns(over_slo_expr().alias("violating")))
    return per.sort("service", "ts")


def summarise(pool: pl.DataFrame, holdings: pl.DataFrame, services: pl.DataFrame,
              slos: SloTable, step_s: int) -> OverviewSummary:
    """The Overview KPIs for one range.

    Parameters
    ----------
    pool:
        ``pool_timeline`` output (one row per step and pool).
    holdings:
        ``holdings`` output (``ts, pool, cls, team, workload, gpus``).
    services:
        ``service_timeline`` output (needs ``ts, service, p99_ms``).
    slos:
        Every service's p99 SLO (:class:`analytics.slo.SloTable`).
    step_s:
        The step the timelines were computed at.
    """
    totals = _per_step_totals(pool) if pool.height else pool
    steps = totals.height
    pool_max = pool_size(totals["gpus_total"].to_numpy()) if steps else 0.0
    pool_mean = float(totals["gpus_total"].mean() or 0.0) if steps else 0.0
    gpu_sum = float(pool["gpus_total"].sum() or 0.0) if pool.height else 0.0
    capacity_gpu_hours = gpu_hours(pool["gpus_total"].to_numpy(), step_s=step_s) if pool.height else 0.0
    held = [CLASS_COLUMNS[c] for c in HELD_CLASSES if CLASS_COLUMNS[c] in pool.columns]
    allocation = None
    if gpu_sum > 0 and held:
        allocation = 100.0 * float(pool.select(pl.sum_horizontal(held).sum()).item()) / gpu_sum
    activity = None
    if pool.height and "activity_pct" in pool.columns:
        # GPU-weighted: a 64-GPU pool at 80% matters more than an 8-GPU pool at 10%.
        known = pool.filter(pl.col("activity_pct").is_not_null() & (pl.col("gpus_total") > 0))
        if known.height:
            activity = float((known["activity_pct"] * known["gpus_total"]).sum()
                             / known["gpus_total"].sum())
    viol = slo_violations(services, slos, step_s)
    by_service = minutes_over_slo_by_service(viol, step_s=step_s)
    union_min = minutes_over_slo_any(viol, step_s=step_s)
    return OverviewSummary(
        steps=steps, step_s=step_s, pool_gpus_max=pool_max, pool_gpus_mean=pool_mean,
        allocation_pct=allocation, activity_pct=activity, gpu_hours=capacity_gpu_hours,
        slo_violation_min=union_min, slo_violation_min_by_service=by_service,
        class_share=class_gpu_hours(pool, step_s),
        team_share=team_gpu_hours(holdings, step_s, capacity_gpu_hours),
        classes=class_long(pool), violations=viol)


def class_long(pool: pl.DataFrame) -> pl.DataFrame:
    """GPUs per class and step, pools summed, long: ``ts, cls, gpus`` (stacked-area input)."""
    if pool.height == 0:
        return pl.DataFrame(schema={"ts": pl.Int64, "cls": pl.Utf8, "gpus": pl.Float64})
    totals = _per_step_totals(pool)
    present = [c for c in WORKLOAD_CLASSES if CLASS_COLUMNS[c] in totals.columns]
    long = totals.unpivot(index="ts", on=[CLASS_COLUMNS[c] for c in present],
                          variable_name="cls", value_name="gpus")
    return long.with_columns(pl.col("cls").str.strip_prefix("gpus_"),
                             pl.col("gpus").cast(pl.Float64)).sort("ts")


def pool_headline(s: OverviewSummary) -> str:
    """The Overview's answer in one sentence (the review's finding on the pool too): the pool,
    who held its GPU-hours, and the minutes over the SLO with their scope.

    >>> share = pl.DataFrame({"cls": ["batch", "inference", "idle"], "share": [0.4, 0.35, 0.25]})
    >>> pool_headline(OverviewSummary(steps=10080, step_s=60, pool_gpus_max=64, pool_gpus_mean=64,
    ...     allocation_pct=75.0, activity_pct=50.0, gpu_hours=10752, slo_violation_min=1033,
    ...     slo_violation_min_by_service={"chat": 570.0, "rec": 546.0}, class_share=share))
    "A pool of 64 GPUs over 7 days: batch held 40% of its GPU-hours, inference 35%, 25% sat idle; some service's p99 was over its SLO for 1,033 minutes, observed (chat 570 min, rec 546 min)."
    """
    if s.steps == 0:
        return "No steps in this range: nothing to summarise."
    share = dict(s.class_share.select("cls", "share").iter_rows()) if s.class_share.height else {}
    per = ", ".join(f"{n} {minutes_text(m)}" for n, m in s.slo_violation_min_by_service.items())
    over = (f"some service's p99 was over its SLO for {s.slo_violation_min:,.0f} minutes, observed ({per})" if per
            else "no latency data to judge an SLO by")
    return (f"A pool of {s.pool_gpus_max:,.0f} GPUs over {span_text(s.span_h)}: batch held "
            f"{share.get('batch', 0):.0%} of its GPU-hours, inference {share.get('inference', 0):.0%}, "
            f"{share.get('idle', 0):.0%} sat idle; {over}.")


def store_headline(sources: pl.DataFrame, metrics: pl.DataFrame, tz: str) -> str:
    """What a store holds, in one sentence (the Data page's answer): its sources, metrics and
    the time they cover, in zone ``tz``.

    >>> from datetime import datetime
    >>> src = pl.DataFrame({"name": ["a.prom", "b.csv"], "first_ts": [datetime(2026, 10, 1), datetime(2026, 10, 2)],
    ...                     "last_ts": [datetime(2026, 10, 8), datetime(2026, 10, 5)]})
    >>> store_headline(src, pl.DataFrame({"metric": ["x", "y", "z"]}), "UTC")
    '2 sources, 3 metrics: Oct 1 00:00 → Oct 8 00:00 UTC.'
    """
    if sources.height == 0:
        return "The store is empty: add data below."
    first, last = sources["first_ts"].min(), sources["last_ts"].max()
    span = "" if first is None or last is None else f": {format_span(_epoch_ms(first), _epoch_ms(last), tz)}"
    n = metrics.height
    return f"{sources.height:,} source{'s' if sources.height != 1 else ''}, {n:,} metric{'s' if n != 1 else ''}{span}."


def _epoch_ms(ts: Any) -> int:
    """A naive UTC datetime (the store's) as epoch milliseconds."""
    return int(ts.replace(tzinfo=timezone.utc).timestamp() * 1000)


def label_inventory(series: pl.DataFrame, *, examples: int = 3, examples_chars: int = 48) -> pl.DataFrame:
    """Labels of one metric's series (``Store.series(metric)``): how many series carry each
    raw label, how many distinct values it takes, and a few of them.

    Returns ``label, series, values, examples``, most common label first. ``examples`` holds
    the commonest values, at most ``examples`` of them and as many as fit in
    ``examples_chars`` characters (at least one, shortened with an ellipsis): a table cell a
    projector shows whole, where three GPU UUIDs were cut off.

    >>> s = pl.DataFrame({"labels": ['{"uuid": "GPU-407297d2-13ba-d1ac-fb18-8cd87a15d246"}',
    ...                              '{"uuid": "GPU-2ef3fb9d-91c4-4b1e-9c3e-6a1d2b7c8e90"}']})
    >>> label_inventory(s, examples_chars=30)["examples"][0]
    'GPU-2ef3fb9d-91c4-4b1e-9c3e-6…'
    """
    import orjson

    seen: dict[str, dict[str, int]] = {}
    for raw in series["labels"].to_list() if "labels" in series.columns else []:
        for key, value in (orjson.loads(raw) if raw else {}).items():
            counts = seen.setdefault(key, {})
            counts[str(value)] = counts.get(str(value), 0) + 1

    def shown(counts: dict[str, int]) -> str:
        common = sorted(counts, key=lambda x: (-counts[x], x))[:examples]
        text = common[0] if len(common[0]) <= examples_chars else common[0][:examples_chars - 1] + "…"
        for value in common[1:]:
            if len(text) + 2 + len(value) > examples_chars:
                break
            text += ", " + value
        return text

    rows = [{"label": k, "series": sum(c.values()), "values": len(c), "examples": shown(c)}
            for k, c in seen.items()]
    schema = {"label": pl.Utf8, "series": pl.Int64, "values": pl.Int64, "examples": pl.Utf8}
    return pl.DataFrame(rows, schema=schema).sort(["series", "label"], descending=[True, False])


# Bucket widths a reader recognises (seconds); thinning picks the first that fits.
NICE_BUCKETS_S: tuple[int, ...] = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
                                   43200, 86400)


def _bucket_steps(steps: int, max_points: int, step_s: int | None) -> int:
    k = max(1, -(-steps // max_points))
    if step_s and k > 1:
        for width in NICE_BUCKETS_S:
            if width % step_s == 0 and width // step_s >= k:
                return width // step_s
    return k


def thin_for_display(classes: pl.DataFrame, violations: pl.DataFrame, *,
                     max_points: int = 720,
                     step_s: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Coarsen the pool story to at most ``max_points`` steps for drawing; KPIs use the full data.

    Three weeks at one minute is 30,000 steps per line, more than a browser draws quickly and
    more than a screen shows. Steps are grouped into buckets of ``k`` steps (``ts`` = the
    bucket's last step): GPUs by their mean (GPU-hours are kept), p99 by its maximum (a tail is
    never smoothed away), the SLO by its minimum, and a bucket violates if any step did.

    With ``step_s`` given, ``k * step_s`` is a round width (5 min, 15 min, 1 h...).
    Returns the two frames and ``k`` (1 when nothing was thinned).
    """
    steps = classes["ts"].n_unique() if classes.height else 0
    k = _bucket_steps(steps, max_points, step_s)
    if k == 1:
        return classes, violations, 1
    order = classes.select(pl.col("ts").unique().sort()).with_row_index("i")
    bucket = order.with_columns((pl.col("i") // k).alias("b"))
    ends = bucket.group_by("b").agg(pl.col("ts").max().alias("ts_end"))
    key = bucket.join(ends, on="b").select("ts", "ts_end")
    c = (classes.join(key, on="ts").group_by("ts_end", "cls")
         .agg(pl.col("gpus").mean()).rename({"ts_end": "ts"}).sort("ts", "cls"))
    v = violations
    if v.height:
        v = (v.join(key, on="ts", how="left")
             .with_columns(pl.col("ts_end").fill_null(pl.col("ts")))
             .group_by("ts_end", "service")
             .agg(pl.col("p99_ms").max(), pl.col("slo_ms").min(), pl.col("violating").any())
             .rename({"ts_end": "ts"}).sort("service", "ts"))
    return c, v, k


def pool_story_data(classes: pl.DataFrame, violations: pl.DataFrame) -> pl.DataFrame:
    """The data behind the pool-story chart as one frame (for CSV export): class rows
    ``ts, cls, gpus`` and latency rows ``ts, service, p99_ms, slo_ms, violating``."""
    if violations.height == 0:
        return classes
    return pl.concat([classes, violations], how="diagonal_relaxed").sort("ts", nulls_last=True)


def describe_signals(report: pl.DataFrame) -> str:
    """One line of a signal report: how many signals are present, and which are missing.

    >>> describe_signals(pl.DataFrame({"signal": ["gpu_holders", "kueue", "hpa"],
    ...                                "found": [True, False, False]}))
    '1 of 3 signals present; missing: kueue, hpa'
    >>> describe_signals(pl.DataFrame({"signal": ["gpu_holders"], "found": [True]}))
    'All 1 signals present'
    """
    missing = report.filter(~pl.col("found"))["signal"].to_list()
    if not missing:
        return f"All {report.height} signals present"
    return (f"{report.height - len(missing)} of {report.height} signals present; "
            f"missing: {', '.join(missing)}")


def describe_class_rules(rules: pl.DataFrame) -> str:
    """One line saying how GPUs without a pod label were counted (:func:`analytics.timeline.class_rules`).

    The wording is the timeline's own (``short``, :func:`analytics.timeline.pool.unlabelled_gpu_rule`).

    >>> describe_class_rules(pl.DataFrame({"job": ["dcgm"], "gpus": [48], "short": ["unknown"]}))
    'GPUs without a pod label: dcgm (48 GPUs): unknown'
    """
    parts = [f"{r['job'] or 'exporter'} ({r['gpus']} GPUs): {r['short']}" for r in rules.iter_rows(named=True)]
    return "GPUs without a pod label: " + ("; ".join(parts) if parts else "none")


# The signals a timeline step needs at least one of: without them no range has steps.
TIMELINE_SIGNALS = ("gpu_holders", "request_latency", "request_rate")
SIGNALS_BY_NAME = {s.name: s for s in SIGNALS}


def no_steps_message(report: pl.DataFrame, metrics: list[str], first_ms: int | None, last_ms: int | None,
                     tz: str) -> str:
    """Why a view has no timeline steps, told apart: metrics Tidelens does not recognise, or a
    range outside the data (with the data's span), or an empty store.

    >>> rep = pl.DataFrame({"signal": ["gpu_holders", "request_rate"], "found": [False, False]})
    >>> no_steps_message(rep, ["up", "node_load1"], 0, 3_600_000, "UTC")[:47]
    "None of this store's 2 metrics (up, node_load1)"
    """

    if not metrics:
        return "The store holds no samples yet: load files on the Data page."
    found = set(report.filter(pl.col("found"))["signal"].to_list())
    if not found & set(TIMELINE_SIGNALS):
        names = SIGNALS_BY_NAME
        wanted = sorted({m for s in TIMELINE_SIGNALS for m in names[s].metrics})
        shown = ", ".join(metrics[:8]) + (f" and {len(metrics) - 8} more" if len(metrics) > 8 else "")
        return (f"None of this store's {len(metrics)} metrics ({shown}) is one the timelines read "
                f"(for example {', '.join(wanted[:6])}): the data is there but not recognised. "
                "`tidelens signals` lists what each analysis needs; rename the metrics at export, "
                "or load dcgm-exporter, vLLM/HTTP histogram or kube-state-metrics series.")
    span = format_span(first_ms, last_ms, tz) if first_ms is not None and last_ms is not None else "unknown"
    return f"No timeline steps in this range: the data spans {span}. Widen or move the time range."
