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


def holders_at(holdings: pl.DataFrame, pool: str, ts_ms: int, step_ms: int) -> list[dict[str, Any]]:
    """Workloads holding the pool's GPUs in the step ending at ``ts_ms``, and since when.

    ``held_since`` is the start of the unbroken run of steps, ending at ``ts_ms``, in which the
    workload held at least part of a GPU; ``hours_held`` runs from then to ``ts_ms - step``
    (the event's start).
    """
    h = holdings.filter((pl.col("pool") == pool) & (pl.col("ts_ms") <= ts_ms) & (pl.col("gpus") > 0)
                        & (pl.col("cls") != "idle"))
    now = h.filter(pl.col("ts_ms") == ts_ms)
    if now.height == 0:
        return []
    out = []
    keys = now.group_by("cls", "team", "workload").agg(pl.col("gpus").sum())
    hist = h.join(keys.select("cls", "team", "workload"), on=["cls", "team", "workload"], how="semi")
    runs = {(r[0], r[1], r[2]): r[3] for r in
            hist.group_by("cls", "team", "workload").agg(pl.col("ts_ms").unique().sort()).iter_rows()}
    for cls, team, workload, gpus in keys.sort("gpus", descending=True).iter_rows():
        ts = np.asarray(runs[(cls, team, workload)], dtype=np.int64)
        breaks = np.flatnonzero(np.diff(ts) != step_ms)
        first = int(ts[breaks[-1] + 1]) if breaks.size else int(ts[0])
        since_ms = first - step_ms
        out.append({"cls": cls, "team": team, "workload": workload, "gpus": round(float(gpus), 4),
                    "held_since": iso_utc(since_ms),
                    "hours_held": round((ts_ms - step_ms - since_ms) / 3_600_000, 3)})
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
