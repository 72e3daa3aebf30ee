"""Evidence a postmortem can cite: who held the GPUs and since when, and a regression with CIs.

Everything here reads the same timeline frames the attribution used, so a number in the
report is a number on the timeline at the cited step.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl

from analytics.events.event import iso_utc
from analytics.times import step_start_ms

_KEYS = ["pool", "cls", "team", "workload"]


def holding_runs(holdings: pl.DataFrame, step_ms: int) -> pl.DataFrame:
    """Unbroken runs of steps in which each workload held part of a GPU, computed once.

    Returns ``pool, cls, team, workload, first_ts, last_ts`` (step end times): the workload held
    GPUs in every step from ``first_ts`` to ``last_ts``.
    """
    # ``holdings`` is sorted by time, and ``over`` keeps each group's rows in frame order, so no
    # sort by the (string) keys is needed; a gap longer than one step starts a new run.
    h = holdings.filter((pl.col("gpus") > 0) & (pl.col("cls") != "idle")).select(*_KEYS, "ts_ms")
    h = h.with_columns((pl.col("ts_ms").diff().over(_KEYS) > step_ms).fill_null(True).cum_sum().over(_KEYS)
                       .alias("_run"))
    return h.group_by(*_KEYS, "_run").agg(pl.col("ts_ms").min().alias("first_ts"),
                                          pl.col("ts_ms").max().alias("last_ts")).drop("_run")


def holders_at(holdings: pl.DataFrame, runs: pl.DataFrame, pool: str, ts_ms: int,
               step_ms: int) -> list[dict[str, Any]]:
    """Workloads holding the pool's GPUs in the step ending at ``ts_ms``, and since when.

    ``holdings`` must be sorted by ``ts_ms``; ``runs`` is :func:`holding_runs` of it.
    ``held_since`` is the start of the unbroken run of steps, ending at ``ts_ms``, in which the
    workload held at least part of a GPU; ``hours_held`` runs from then to ``ts_ms - step``
    (the event's start).
    """
    ts = holdings["ts_ms"]
    lo, hi = int(ts.search_sorted(ts_ms, "left")), int(ts.search_sorted(ts_ms, "right"))
    now = (holdings.slice(lo, hi - lo)
           .filter((pl.col("pool") == pool) & (pl.col("gpus") > 0) & (pl.col("cls") != "idle"))
           .group_by(*_KEYS).agg(pl.col("gpus").sum()))
    if now.height == 0:
        return []
    live = runs.filter((pl.col("pool") == pool) & (pl.col("first_ts") <= ts_ms) & (pl.col("last_ts") >= ts_ms))
    now = now.join(live, on=_KEYS, how="left").sort("gpus", "workload", descending=[True, False])
    out = []
    for row in now.iter_rows(named=True):
        since_ms = step_start_ms(int(row["first_ts"] if row["first_ts"] is not None else ts_ms), step_ms)
        out.append({"cls": row["cls"], "team": row["team"], "workload": row["workload"],
                    "gpus": round(float(row["gpus"]), 4), "held_since": iso_utc(since_ms),
                    "hours_held": round((step_start_ms(ts_ms, step_ms) - since_ms) / 3_600_000, 3)})
    return out


def latency_regression(steps: pl.DataFrame, maxlags: int | None = None) -> dict[str, Any]:
    """OLS of log p99 on log traffic and batch occupancy, Newey-West (HAC) standard errors.

    ``steps`` needs ``rps, p99_ms, gpus_batch, gpus_total`` for one service over the analysed
    range. Batch occupancy is the share of the pool's GPUs batch held. Returns coefficients with
    95% confidence intervals and p-values; ``{"n": 0}``-like dict with a note when it cannot fit.
    """
    import statsmodels.api as sm  # heavy; only the evidence needs it

    f = steps.select(pl.col("rps").cast(pl.Float64), pl.col("p99_ms").cast(pl.Float64),
                     (pl.col("gpus_batch") / pl.col("gpus_total")).cast(pl.Float64).alias("batch_share")
                     ).drop_nulls().filter((pl.col("rps") > 0) & (pl.col("p99_ms") > 0)
                                           & pl.col("batch_share").is_finite())
    n = f.height
    if n < 30:
        return {"n": n, "note": "fewer than 30 steps with traffic and latency: no regression"}
    y = np.log(f["p99_ms"].to_numpy())
    cols = {"log_rps": np.log(f["rps"].to_numpy()), "batch_share": f["batch_share"].to_numpy()}
    names = ["const"] + [k for k, v in cols.items() if np.ptp(v) > 1e-12]
    X = np.column_stack([np.ones(n)] + [cols[k] for k in names[1:]])
    lags = int(maxlags if maxlags is not None else np.floor(4 * (n / 100) ** (2 / 9)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.OLS(y, X).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    ci = np.asarray(res.conf_int(alpha=0.05))
    coef = {name: {"estimate": round(float(res.params[i]), 6), "ci95_low": round(float(ci[i, 0]), 6),
                   "ci95_high": round(float(ci[i, 1]), 6), "p_value": float(res.pvalues[i])}
            for i, name in enumerate(names)}
    return {"n": n, "model": "log p99_ms ~ const + log rps + batch_share (OLS)",
            "errors": f"HAC / Newey-West, {lags} lags", "r_squared": round(float(res.rsquared), 4),
            "coef": coef}


def format_p_value(p: float) -> str:
    """A p-value as a reader takes it in: three decimals, or ``< 0.001`` (never 38 zeros).

    >>> format_p_value(0.04567), format_p_value(4e-37), format_p_value(float("nan"))
    ('0.046', '< 0.001', 'n/a')
    """
    if p != p:
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def regression_rows(reg: dict) -> list[dict]:
    """The regression's terms as table rows with readable numbers (the page and the report)."""
    return [{"term": t, "estimate": f"{c['estimate']:.4g}",
             "95% CI": f"[{c['ci95_low']:.4g}, {c['ci95_high']:.4g}]",
             "p-value": format_p_value(c["p_value"])} for t, c in (reg.get("coef") or {}).items()]
