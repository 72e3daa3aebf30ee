"""Tables the What-if and Chargeback pages show: policies side by side, the typical day, the
externality ledger by team and period, and what each team would pay under each policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics.measures import best_policy, gpu_hours, split_violation_by_team, step_minutes
from analytics.whatif.outputs import PolicyResult
from analytics.whatif.params import PoolScenario
from analytics.times import step_start_ms
from analytics.units import money, span_text


def policy_table(results: dict[str, PolicyResult], best: str | None = None) -> pl.DataFrame:
    """One row per policy: p99, compliance, violation minutes, utilization, batch work done,
    lost, and unfinished at the period's end, runs not finished, the median and worst queueing
    delay (hours from a run's arrival to its start), cost, and
    ``best``: the best policy (:func:`analytics.measures.best_policy` over these results, or
    ``best``: the pool's, when these are one service's rows beside the pool's answer) and which
    the lowest total cost, for a table a room reads at a glance.
    """
    rows = []
    for name, r in results.items():
        s = r.summary
        rows.append({"policy": name, "best": "", "p99_ms": s.p99_ms,
                     "worst_minute_p99_ms": s.worst_minute_p99_ms,
                     "slo_compliance": s.slo_compliance,
                     "violation_minutes": s.violation_minutes,
                     "pool_utilization": s.pool_utilization,
                     "pool_utilization_active": s.pool_utilization_active,
                     "batch_goodput_gpu_hours": s.batch_goodput_gpu_hours,
                     "batch_lost_gpu_hours": s.batch_lost_gpu_hours,
                     "batch_unfinished_gpu_hours": s.batch_unfinished_gpu_hours,
                     "batch_runs_unfinished": s.batch_runs_unfinished,
                     "queue_delay_median_h": s.queue_delay_median_h,
                     "queue_delay_max_h": s.queue_delay_max_h,
                     "cost_total": s.cost_total,
                     "cost_per_useful_gpu_hour": s.cost_per_useful_gpu_hour,
                     "externality_cost": s.externality_cost})
    if rows:
        pool = best is not None
        best = best if pool else best_policy({name: r.summary for name, r in results.items()})
        # Short, to fit its column on a projector: the pool's answer, or these rows' own best.
        for row in rows:
            if row["policy"] == best:
                row["best"] = "best for the pool" if pool else "fewest minutes"
        cheapest = min(rows, key=lambda r: (r["cost_total"], r["violation_minutes"]))
        cheapest["best"] = (cheapest["best"] + " · " if cheapest["best"] else "") + "cheapest"
    return pl.DataFrame(rows)


def typical_day(scn: PoolScenario, results: dict[str, PolicyResult], bin_min: int = 5) -> pl.DataFrame:
    """Median over days of each policy's p99 per ``bin_min`` minutes of day (``minute`` is the
    bin's start): ``minute, hour, policy, p99_ms``. Five-minute bins: a day is 288 points a
    policy, which a browser redraws at once when a slider moves (1,440 a policy did not)."""
    minute = (np.floor(scn.hour_of_day() * 60.0 / bin_min) * bin_min).astype(np.int64)
    parts = []
    for name, r in results.items():
        parts.append(pl.DataFrame({"minute": minute, "p99_ms": r.series["p99_ms"]})
                     .group_by("minute").agg(pl.col("p99_ms").median())
                     .with_columns(pl.lit(name).alias("policy")))
    out = pl.concat(parts).sort("policy", "minute")
    return out.with_columns((pl.col("minute") / 60.0).alias("hour"))


def ledger(scn: PoolScenario, results: Mapping[str, PolicyResult], period_h: float = 24.0
           ) -> pl.DataFrame:
    """Violation minutes and their price by policy, team and period (default: day, UTC).

    Columns ``policy``, ``period_start_ms``, ``service`` (the one ``scn`` models), ``team``,
    ``own`` (the team is the service's own), ``violation_minutes``, ``cost``; what no other
    team caused stays with the service's own team (the split of
    :func:`analytics.measures.split_violation_by_team`, the externality's).
    """
    price = scn.pool.violation_price_per_min
    service = scn.modelled_service()
    ts = scn.ts_ms()
    period_ms = int(period_h * 3_600_000)
    period = (step_start_ms(ts, scn.step_s * 1000) // period_ms) * period_ms
    rows: list[pl.DataFrame] = []
    for name, r in results.items():
        per_team, own = split_violation_by_team(r.series["violation"],
                                                r.trace.blame_by_team if r.trace is not None else {})
        per_team[scn.service.team] = per_team.get(scn.service.team, 0.0) + own
        for team, x in per_team.items():
            rows.append(pl.DataFrame({"policy": name, "period_start_ms": period, "team": team,
                                      "violation_minutes": step_minutes(x, step_s=scn.step_s)}))
    if not rows:
        return pl.DataFrame(schema=LEDGER_SCHEMA)
    out = (pl.concat(rows).group_by("policy", "period_start_ms", "team")
           .agg(pl.col("violation_minutes").sum())
           .filter(pl.col("violation_minutes") > 0)
           .with_columns(pl.lit(service).alias("service"), (pl.col("team") == scn.service.team).alias("own"),
                         (pl.col("violation_minutes") * price).alias("cost")))
    return out.select(list(LEDGER_SCHEMA)).sort("policy", "period_start_ms", "team")


LEDGER_SCHEMA = {"policy": pl.Utf8, "period_start_ms": pl.Int64, "service": pl.Utf8, "team": pl.Utf8,
                 "own": pl.Boolean, "violation_minutes": pl.Float64, "cost": pl.Float64}


def pool_ledger(replays: Iterable[tuple[PoolScenario, Mapping[str, PolicyResult]]], policy: str,
                period_h: float = 24.0) -> pl.DataFrame:
    """:func:`ledger` of every service of a pool under ``policy`` (each service's scenario and
    its replays), one frame: each service's minutes over its own SLO, by team and period."""
    parts = [ledger(scn, {policy: results[policy]}, period_h) for scn, results in replays if policy in results]
    return (pl.concat(parts) if parts else pl.DataFrame(schema=LEDGER_SCHEMA)).sort(
        "policy", "period_start_ms", "service", "team")


def bills(scn: PoolScenario, results: dict[str, PolicyResult]) -> pl.DataFrame:
    """What each team would pay under each policy: its GPU-hours at the price of the GPUs
    it ran on, plus the violation minutes it caused.

    Batch runs on spot GPUs under ``partitioned`` (class C), on reserved GPUs elsewhere;
    inference on reserved GPUs. Columns ``policy``, ``team``, ``gpu_hours``, ``gpu_cost``,
    ``externality_cost``, ``total``.
    """
    pool = scn.pool
    rows = []
    for name, r in results.items():
        batch_price = pool.price_spot_per_gpu_h if name == "partitioned" \
            else pool.price_reserved_per_gpu_h
        gpu_h: dict[str, float] = {scn.service.team: gpu_hours(r.series["inference_gpus"],
                                                               step_s=scn.step_s)}
        price: dict[str, float] = {scn.service.team: pool.price_reserved_per_gpu_h}
        for j in r.jobs:
            gpu_h[j["team"]] = gpu_h.get(j["team"], 0.0) + float(j["held_gpu_h"])
            price.setdefault(j["team"], batch_price)
        ext = {e["team"]: float(e["cost"]) for e in r.externality
               if e["team"] != scn.service.team}
        for team in sorted(set(gpu_h) | set(ext)):
            g = gpu_h.get(team, 0.0)
            cost = g * price.get(team, batch_price)
            rows.append({"policy": name, "team": team, "gpu_hours": g, "gpu_cost": cost,
                         "externality_cost": ext.get(team, 0.0),
                         "total": cost + ext.get(team, 0.0)})
    return pl.DataFrame(rows)


PERIOD_WORDS = {24.0: "day", 168.0: "week"}


@dataclass(frozen=True)
class LedgerSummary:
    """What the Chargeback page shows above a ledger: totals and who is billed the most."""

    by_team: pl.DataFrame        # team, violation_minutes, cost; most expensive first
    violation_minutes: float
    charged_to_others: float     # cost of minutes caused by teams other than each service's own
    top_payer: str | None        # the other team billed the most, if any
    top_payer_cost: float        # over the whole span, every period added up
    top_payer_minutes: float     # the minutes of other teams' services its work caused
    table: pl.DataFrame          # the ledger as a meeting reads it (:func:`ledger_table`)
    span_h: float | None = None  # the hours the ledger covers (None: unknown)
    period_h: float = 24.0

    def top_payer_bill(self) -> str:
        """The top payer's bill, said over the span it covers and per period: the card said
        "for the day" under a seven-day sum.

        >>> LedgerSummary(pl.DataFrame(), 0.0, 0.0, "ml", 9830.4, 200.0, pl.DataFrame(), 168.0).top_payer_bill()
        '$9,830 over 7 days ($1,404 a day)'
        """
        total = money(self.top_payer_cost)
        if not self.span_h:
            return f"{total} over the period modelled"
        per = PERIOD_WORDS.get(self.period_h, f"{self.period_h:g} h")
        return (f"{total} over {span_text(self.span_h)} "
                f"({money(self.top_payer_cost * self.period_h / self.span_h)} a {per})")


def ledger_table(book: pl.DataFrame, period_h: float = 24.0) -> pl.DataFrame:
    """The ledger as a meeting reads it: the period as a date (UTC, as :func:`ledger` cuts it),
    the service and the team, minutes over the SLO (modelled) to a tenth (a fraction of a minute
    still costs: "0 minutes, $21" read as a mistake) and whole dollars.

    >>> book = pl.DataFrame({"period_start_ms": [0], "service": ["chat"], "team": ["ml"],
    ...                      "violation_minutes": [87.423], "cost": [4371.1479]})
    >>> ledger_table(book).row(0)
    (datetime.date(1970, 1, 1), 'chat', 'ml', 87.4, 4371.0)
    """
    per = PERIOD_WORDS.get(period_h, "period")
    return book.select(pl.from_epoch("period_start_ms", time_unit="ms").dt.date().alias(f"{per} (UTC)"),
                       "service", "team", pl.col("violation_minutes").round(1).alias("minutes over the SLO, modelled"),
                       pl.col("cost").round(0).alias("cost ($)"))


def summarise_ledger(book: pl.DataFrame, *, span_h: float | None = None, period_h: float = 24.0) -> LedgerSummary:
    """Totals of a :func:`ledger` (or :func:`pool_ledger`) frame, cut in ``period_h`` periods
    over ``span_h`` hours, separating each service's own team from the others: who pays is the
    team other than a service's own billed the most (ties to the earlier name), the one
    definition the pool's answer names too.

    >>> book = pl.DataFrame({"period_start_ms": [0, 0], "service": ["chat", "chat"], "team": ["ml", "serving"],
    ...                      "own": [False, True], "violation_minutes": [10.0, 2.0], "cost": [500.0, 100.0]})
    >>> s = summarise_ledger(book)
    >>> (s.violation_minutes, s.charged_to_others, s.top_payer, s.top_payer_minutes)
    (12.0, 500.0, 'ml', 10.0)
    """
    by_team = (book.group_by("team").agg(pl.col("violation_minutes").sum(), pl.col("cost").sum())
               .sort(["cost", "team"], descending=[True, False]))
    others = (book.filter(~pl.col("own")).group_by("team")
              .agg(pl.col("violation_minutes").sum(), pl.col("cost").sum())
              .filter(pl.col("cost") > 0).sort(["cost", "team"], descending=[True, False]))
    return LedgerSummary(
        by_team=by_team, violation_minutes=float(by_team["violation_minutes"].sum()),
        charged_to_others=float(others["cost"].sum()),
        top_payer=others["team"][0] if others.height else None,
        top_payer_cost=float(others["cost"][0]) if others.height else 0.0,
        top_payer_minutes=float(others["violation_minutes"][0]) if others.height else 0.0,
        table=ledger_table(book, period_h), span_h=span_h, period_h=period_h)
