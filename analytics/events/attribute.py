"""Attribution: counterfactual capacity, the four evaluations of L, Shapley shares and the cause.

Per step of each service (DESIGN.md, tail events, steps 2-6):

* T is the observed traffic, T0 its norm band's expected value.
* C is the ready replicas; C0 the replicas it would have had without batch: the replicas the
  autoscaler wanted a warm-up ago (``min(desired(t), desired(t - W))``: a replica asked for at
  ``t - W`` serves at ``t``), bounded by ready + the GPUs batch held in the pool within that
  warm-up window (``max`` of batch GPUs over ``[t - W, t]``: a GPU freed less than a warm-up ago
  has not produced a ready replica yet). Idle GPUs at asking time cover the shortfall first
  (what they leave unmet is scaling lag, not batch); the rest of the batch GPUs is shared among
  the pool's services in proportion to their shortfall (in GPUs).
* L is evaluated four times and split by Shapley over the two factors, in log latency:
  ``phi_traffic = 1/2 [(L(T,C0) - L(T0,C0)) + (L(T,C) - L(T0,C))]``,
  ``phi_batch = 1/2 [(L(T0,C) - L(T0,C0)) + (L(T,C) - L(T,C0))]``,
  ``unexplained = log observed p99 - L(T,C)``.
  Where the load per replica is beyond anything seen uncontended, a positive ``unexplained`` is
  overload the model could not be calibrated on; it goes to the two factors in proportion to
  their positive parts at that step. Each term is summed over the event's steps, then clipped
  at zero, then normalised to shares adding to 1.

Cause, in this order (:func:`cause_of`):

1. ``scaling_lag``: batch and traffic shares both below ``mixed_share``, traffic within its norm
   (fewer than ``surge_steps_share`` of the steps above the band), replicas short of what the
   autoscaler wanted, enough free GPUs in the pool for what it asked when it asked, **and the
   shortfall explains the tail**: the latency the missing replicas added by the model
   (``L(T, C) - L(T, desired)``, plus the model's shortfall on steps overloaded beyond the
   calibrated range only for want of them), summed over the event, is at least what the model
   cannot explain (``observed - L(T, C)`` elsewhere). A replica that answers slowly while the
   autoscaler happens to add one is not a lag: the model at the desired capacity is no faster,
   and the tail stays unexplained.
2. ``mixed``: batch and traffic shares both at least ``mixed_share`` (0.3); or, where traffic surged
   (above its norm band for at least ``min_duration_min`` in a row: a surge, not noise), both at
   least ``compound_share`` (0.15). A surge inside batch contention that outlasts it is a smaller
   part of the event's minutes than of its cause: the contention alone would have made a tail,
   and so would the surge (as the store's own surges without batch show), and a postmortem that
   reads "batch 85%" must still say the users added load.
3. ``unexplained``: batch + traffic shares below ``explained_share`` (0.5).
4. ``batch_contention`` or ``traffic_surge``: whichever share is larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics.events.config import EventsConfig
from analytics.events.detect import detect_runs
from analytics.events.latency_model import LatencyModel


def rolling_max_back(x: np.ndarray, window: int) -> np.ndarray:
    """max(x[t - window .. t]) per t (window 0 = x itself)."""
    if window <= 0:
        return x.copy()
    s = pl.Series(x).rolling_max(window_size=window + 1, min_samples=1)
    return s.to_numpy().astype(float)


def capacity_without_batch(steps: pl.DataFrame, warmup_steps: dict[str, int],
                           gpus_per_replica: dict[str, float]) -> pl.DataFrame:
    """Add ``c_want`` and ``c0`` to a steps frame sorted by (service, ts_ms).

    ``steps`` needs ``ts_ms, service, pool, ready, desired, gpus_batch, gpus_idle``.
    """
    parts = []
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        w = int(warmup_steps.get(service, 0))
        gpr = float(gpus_per_replica.get(service, 1.0))
        desired = g["desired"].to_numpy().astype(float)
        lagged = np.concatenate([np.full(min(w, desired.size), desired[0] if desired.size else 0.0),
                                 desired[:max(desired.size - w, 0)]]) if w else desired
        c_want = np.minimum(desired, lagged)
        ready = g["ready"].to_numpy().astype(float)
        short_gpus = np.maximum(c_want - ready, 0.0) * gpr
        batch_w = rolling_max_back(g["gpus_batch"].to_numpy().astype(float), w)
        idle = g["gpus_idle"].to_numpy().astype(float)
        idle_ask = np.concatenate([np.full(min(w, idle.size), idle[0] if idle.size else 0.0),
                                   idle[:max(idle.size - w, 0)]]) if w else idle
        parts.append(g.with_columns(pl.Series("c_want", c_want), pl.Series("short_gpus", short_gpus),
                                    pl.Series("batch_w", batch_w), pl.Series("idle_ask", idle_ask),
                                    pl.lit(gpr).alias("gpr")))
    f = pl.concat(parts)
    # Per pool and step: idle GPUs first, then batch GPUs, shared in proportion to shortfall.
    f = f.with_columns(pl.col("short_gpus").sum().over(["pool", "ts_ms"]).alias("pool_short"))
    f = f.with_columns(
        pl.min_horizontal(pl.col("batch_w"), (pl.col("pool_short") - pl.col("idle_ask")).clip(lower_bound=0))
        .alias("pool_alloc"))
    f = f.with_columns(
        pl.when(pl.col("pool_short") > 0)
        .then(pl.min_horizontal(pl.col("short_gpus"), pl.col("pool_alloc") * pl.col("short_gpus") / pl.col("pool_short")))
        .otherwise(0.0).alias("alloc_gpus"))
    f = f.with_columns((pl.col("ready") + pl.col("alloc_gpus") / pl.col("gpr")).alias("c0"))
    return f.drop("short_gpus", "batch_w", "pool_short", "pool_alloc")


def evaluate(steps: pl.DataFrame, models: dict[str, LatencyModel]) -> pl.DataFrame:
    """Add the four log-latency evaluations and the per-step Shapley terms.

    Columns added: ``l_tc, l_t0c, l_tc0, l_t0c0`` (log ms), ``l_tcw`` (log L at the replicas the
    autoscaler wanted, for the scaling-lag rule), ``phi_traffic, phi_batch,
    unexplained`` (log ms), ``explained_ms`` = L(T, C) and ``baseline_ms`` = L(T0, C0).
    """
    parts = []
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        m = models.get(service)
        n = g.height
        if m is None:
            nan = np.full(n, np.nan)
            parts.append(g.with_columns(*(pl.Series(c, nan) for c in ("l_tc", "l_t0c", "l_tc0", "l_t0c0", "l_tcw")),
                                        pl.lit(False).alias("beyond_range"), pl.lit(False).alias("beyond_range_w")))
            continue
        t = g["rps"].fill_null(0.0).to_numpy().astype(float)
        t0 = g["t0"].fill_null(g["rps"]).fill_null(0.0).to_numpy().astype(float)
        c = g["ready"].to_numpy().astype(float)
        c0 = g["c0"].to_numpy().astype(float)
        # the capacity the autoscaler wanted now (never less than it had): what a scaling lag withheld
        cw = np.maximum(c, g["desired"].fill_null(g["ready"]).to_numpy().astype(float))
        parts.append(g.with_columns(pl.Series("l_tc", m.log_ms(t, c)), pl.Series("l_t0c", m.log_ms(t0, c)),
                                    pl.Series("l_tc0", m.log_ms(t, c0)), pl.Series("l_t0c0", m.log_ms(t0, c0)),
                                    pl.Series("l_tcw", m.log_ms(t, cw)),
                                    pl.Series("beyond_range", m.beyond_range(t, c)),
                                    pl.Series("beyond_range_w", m.beyond_range(t, cw))))
    f = pl.concat(parts)
    f = f.with_columns(
        (0.5 * ((pl.col("l_tc0") - pl.col("l_t0c0")) + (pl.col("l_tc") - pl.col("l_t0c")))).alias("phi_traffic_raw"),
        (0.5 * ((pl.col("l_t0c") - pl.col("l_t0c0")) + (pl.col("l_tc") - pl.col("l_tc0")))).alias("phi_batch_raw"),
        (pl.col("p99_ms").log() - pl.col("l_tc")).alias("unexplained_raw"),
        pl.col("l_tc").exp().alias("explained_ms"),
        pl.col("l_t0c0").exp().alias("baseline_ms"),
    )
    # Beyond the load per replica ever seen uncontended, the model's shortfall is overload it
    # could not be calibrated on, and that overload exists only because of the two factors:
    # give it to them in proportion to their positive parts at that step.
    pos_b = pl.col("phi_batch_raw").clip(lower_bound=0)
    pos_t = pl.col("phi_traffic_raw").clip(lower_bound=0)
    move = (pl.col("beyond_range") & (pl.col("unexplained_raw") > 0) & ((pos_b + pos_t) > 0)).fill_null(False)
    moved = pl.when(move).then(pl.col("unexplained_raw")).otherwise(0.0)
    return f.with_columns(
        (pl.col("phi_batch_raw") + moved * pos_b / (pos_b + pos_t)).fill_nan(None).fill_null(pl.col("phi_batch_raw")).alias("phi_batch"),
        (pl.col("phi_traffic_raw") + moved * pos_t / (pos_b + pos_t)).fill_nan(None).fill_null(pl.col("phi_traffic_raw")).alias("phi_traffic"),
        (pl.col("unexplained_raw") - moved).alias("unexplained"),
    )


@dataclass
class Attribution:
    """Shares and cause of one event, with the facts the cause rules looked at."""

    shares: dict[str, float]
    cause: str
    traffic_above_band_share: float
    shortfall_replicas_max: float
    free_gpus_when_asked: float | None
    asked_at_ms: int | None
    lag_explained_log: float = 0.0
    model_error_log: float = 0.0
    surge_min: float = 0.0  # the longest run of the event's steps above the norm band, minutes


def cause_of(shares: dict[str, float], cfg: EventsConfig, *, lag: bool, surged: bool = False) -> str:
    """The cause an event's shares give (module docstring), ``lag`` being rule 1's facts and
    ``surged`` whether traffic stayed above its norm band for ``min_duration_min`` in a row.

    ``lag`` (traffic within its norm, replicas short with free GPUs when asked, and the shortfall
    explaining the tail) only counts while neither factor is material: a cause never names what
    its own shares deny.

    >>> cfg = EventsConfig()
    >>> share = {"batch_contention": 0.78, "traffic_surge": 0.2, "unexplained": 0.02}
    >>> cause_of(share, cfg, lag=False), cause_of(share, cfg, lag=False, surged=True)
    ('batch_contention', 'mixed')
    """
    b, t = shares.get("batch_contention", 0.0), shares.get("traffic_surge", 0.0)
    if lag and b < cfg.mixed_share and t < cfg.mixed_share:
        return "scaling_lag"
    if b >= cfg.mixed_share and t >= cfg.mixed_share:
        return "mixed"
    if surged and b >= cfg.compound_share and t >= cfg.compound_share:
        return "mixed"
    if b + t < cfg.explained_share:
        return "unexplained"
    return "batch_contention" if b >= t else "traffic_surge"


def attribute_event(window: pl.DataFrame, start_ms: int, cfg: EventsConfig,
                    slo_ms: float | None = None) -> Attribution:
    """Shares and cause of one event.

    ``window`` is the service's evaluated steps from ``ramp_lookback_min`` before the event to
    its end; the steps with ``ts_ms > start_ms`` are the event's own.
    """
    ev_steps = window.filter(pl.col("ts_ms") > start_ms)
    sums = {k: max(float(np.nansum(ev_steps[c].to_numpy())), 0.0) for k, c in
            (("batch_contention", "phi_batch"), ("traffic_surge", "phi_traffic"), ("unexplained", "unexplained"))}
    total = sum(sums.values())
    shares = ({k: v / total for k, v in sums.items()} if total > 0
              else {"batch_contention": 0.0, "traffic_surge": 0.0, "unexplained": 1.0})
    rps = ev_steps["rps"].fill_null(0.0).to_numpy().astype(float)
    upper = ev_steps["upper"].fill_null(np.inf).to_numpy().astype(float)
    above_share = float((rps > upper).mean()) if rps.size else 0.0
    step_ms = cfg.step_s * 1000
    surges = detect_runs(ev_steps["ts_ms"].to_numpy(), rps > upper, step_ms=step_ms,
                         min_duration_ms=int(cfg.min_duration_min * 60_000), merge_gap_ms=0)
    surge_min = max((e - s for s, e in surges), default=0) / 60_000
    short = (ev_steps["desired"] - ev_steps["ready"]).fill_null(0.0).to_numpy()
    short_max = float(short.max()) if short.size else 0.0
    # When the autoscaler asked: the first step of the window where desired exceeded ready.
    asked_rows = np.flatnonzero((window["desired"] - window["ready"]).fill_null(0.0).to_numpy() >= 1.0 - 1e-9)
    free_when, asked_at, asked_gpus = None, None, 0.0
    gpr = float(window["gpr"][0]) if window.height else 1.0
    if asked_rows.size:
        row = window.row(int(asked_rows[0]), named=True)
        free_when, asked_at = float(row["gpus_idle"]), int(row["ts_ms"])
        asked_gpus = (row["desired"] - row["ready"]) * gpr
    # What the missing replicas added by the model, against what the model cannot explain. Where
    # the load per ready replica is beyond the calibrated range but would not be at the desired
    # replicas, the model's shortfall is overload the missing replicas created: theirs too.
    err = np.clip(ev_steps["unexplained"].fill_null(0.0).to_numpy(), 0.0, None)
    lag_made = (ev_steps["beyond_range"] & ~ev_steps["beyond_range_w"]).fill_null(False).to_numpy()
    lag_log = float(np.nansum(np.clip((ev_steps["l_tc"] - ev_steps["l_tcw"]).to_numpy(), 0.0, None))
                    + np.nansum(np.where(lag_made, err, 0.0)))
    err_log = float(np.nansum(np.where(lag_made, 0.0, err)))
    lag = (above_share < cfg.surge_steps_share and short_max >= 1.0 - 1e-9 and free_when is not None
           and free_when >= asked_gpus - 1e-9 and lag_log > 0 and lag_log >= err_log)
    shares = {k: round(v, 4) for k, v in shares.items()}
    return Attribution(shares=shares, cause=cause_of(shares, cfg, lag=lag, surged=bool(surges)),
                       traffic_above_band_share=above_share, shortfall_replicas_max=short_max,
                       free_gpus_when_asked=free_when, asked_at_ms=asked_at,
                       lag_explained_log=lag_log, model_error_log=err_log, surge_min=surge_min)
