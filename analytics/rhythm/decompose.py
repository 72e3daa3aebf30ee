"""MSTL decomposition of one timeline column into trend, daily, weekly and residual (its norm band
at each step is :mod:`analytics.rhythm.band`).

Why the data is decomposed at a coarser step than it arrives at: a daily or weekly rhythm does
not need minute detail, and STL's cost grows with the period in steps (28 days of 1-minute
data take ~10 minutes with statsmodels' defaults). The series is averaged into bins of
``RhythmConfig.resolution_s`` (10 minutes by default), decomposed there with STL's jump
parameters set as R's ``stl()`` sets them (a tenth of each smoother's window), and the trend
and seasonal components are interpolated back to the input's own steps. The residual and the
norm band are then computed at the input steps, so a one-minute surge still shows.

The MSTL iteration is statsmodels' own (``statsmodels.tsa.seasonal.MSTL.fit``: each period's
STL in turn, twice), written out here only so each period gets jumps sized to its own
windows; the STL fits are statsmodels'.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.rhythm.config import DAY_S, RhythmConfig
from analytics.times import iso_utc

MAX_LEVEL_SHIFTS = 3


@dataclass
class Decomposition:
    """The result of :func:`decompose`.

    Attributes
    ----------
    frame:
        One row per input step: ``ts, observed, trend, daily, weekly, residual, expected,
        lower, upper``; ``expected = trend + daily + weekly``, ``lower``/``upper`` add the
        residual's band quantiles to it.
    coarse:
        The same components at the decomposition step (``resolution_s``), with ``filled``
        true where the step had no data; what charts draw.
    periods_used:
        ``["daily", "weekly"]`` or ``["daily"]`` when the series is too short for a week.
    notes:
        Fallbacks, filled and long gaps, level shifts: sentences a page or JSON can show.
    resolution_s:
        The decomposition step in seconds.
    """

    frame: pl.DataFrame
    coarse: pl.DataFrame
    periods_used: list[str]
    notes: list[str]
    resolution_s: int
    input_step_s: float
    value_col: str
    band_offsets: tuple[float, float]
    long_gaps: list[dict[str, Any]] = field(default_factory=list)
    level_shifts: list[dict[str, Any]] = field(default_factory=list)
    filled_steps: int = 0
    elapsed_s: float = 0.0
    log_scale: bool = False

    def coarse_band(self) -> tuple[pl.Series, pl.Series]:
        """The norm band's lower and upper edges at the decomposition step (for charts)."""
        lo, hi = self.band_offsets
        e = self.coarse["expected"]
        if self.log_scale:
            return (e * math.exp(lo)).alias("lower"), (e * math.exp(hi)).alias("upper")
        return (e + lo).alias("lower"), (e + hi).alias("upper")

    def as_dict(self) -> dict[str, Any]:
        """Metadata (not the frames) for JSON."""
        return {"signal": self.value_col, "periods_used": self.periods_used,
                "resolution_s": self.resolution_s, "input_step_s": self.input_step_s,
                "band_offsets": list(self.band_offsets), "notes": self.notes,
                "long_gaps": self.long_gaps, "level_shifts": self.level_shifts,
                "filled_steps": self.filled_steps}


def _odd_at_least(x: float) -> int:
    n = int(math.ceil(x))
    return n if n % 2 else n + 1


def _stl_windows(period: int, seasonal: int) -> tuple[int, int]:
    """statsmodels' default trend and low-pass windows for an STL of ``period``."""
    trend = _odd_at_least(1.5 * period / (1 - 1.5 / seasonal) + 1e-9)
    low_pass = _odd_at_least(period + 1)
    return trend, low_pass


def mstl_components(y: np.ndarray, periods: list[int], *, robust: bool = False,
                    fast: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """statsmodels' MSTL iteration with per-period jump parameters.

    Parameters
    ----------
    y:
        The regular, gap-free series.
    periods:
        Seasonal periods in steps, ascending.
    robust:
        Robust LOESS in each STL.
    fast:
        Set the jumps to a tenth of each window (R's ``stl()`` defaults); False gives
        statsmodels' defaults (jumps of 1), for comparison.

    Returns
    -------
    trend, seasonal (one row per period), residual
    """
    from statsmodels.tsa.seasonal import STL  # ~1 s to import: only where a decomposition runs

    n = len(y)
    seasonal = np.zeros((len(periods), n))
    deseas = y.astype(float).copy()
    iterate = 1 if len(periods) == 1 else 2
    trend = np.zeros(n)
    for _ in range(iterate):
        for i, period in enumerate(periods):
            deseas = deseas + seasonal[i]
            s_win = 7 + 4 * (i + 1)  # MSTL's default seasonal windows
            t_win, lp_win = _stl_windows(period, s_win)
            jumps = ({"seasonal_jump": math.ceil(s_win / 10), "trend_jump": math.ceil(t_win / 10),
                      "low_pass_jump": math.ceil(lp_win / 10)} if fast else {})
            res = STL(deseas, period=period, seasonal=s_win, trend=t_win, low_pass=lp_win,
                      robust=robust, **jumps).fit()
            seasonal[i] = np.asarray(res.seasonal)
            deseas = deseas - seasonal[i]
            trend = np.asarray(res.trend)
    return trend, seasonal, deseas - trend


def _divisor_at_least(step_s: float) -> int:
    """The smallest divisor of a day that is at least ``step_s`` seconds."""
    for d in range(max(1, int(math.ceil(step_s - 1e-9))), DAY_S + 1):
        if DAY_S % d == 0:
            return d
    return DAY_S


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index runs where ``mask`` is true."""
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def _iso(ts_ms: int) -> str:
    return iso_utc(int(ts_ms) // 1000 * 1000)  # gaps and shifts are told to the second


def _fill_gaps(y: np.ndarray, grid_ms: np.ndarray, res_s: int, period: int,
               cfg: RhythmConfig) -> tuple[np.ndarray, list[dict[str, Any]], int]:
    """Fill missing bins: short runs linearly, long runs from the same time on the day before/after."""
    missing = np.isnan(y)
    out = y.copy()
    long_gaps: list[dict[str, Any]] = []
    max_fill = max(1, cfg.max_fill_gap_s // res_s)
    long_idx: list[tuple[int, int]] = []
    for a, b in _runs(missing):
        if b - a > max_fill:
            long_idx.append((a, b))
            long_gaps.append({"start": _iso(grid_ms[a] - res_s * 1000), "end": _iso(grid_ms[b - 1]),
                              "hours": round((b - a) * res_s / 3600, 2)})
    for a, b in long_idx:
        for i in range(a, b):  # forward: a multi-day gap copies the (already filled) day before
            if i - period >= 0 and not np.isnan(out[i - period]):
                out[i] = out[i - period]
        for i in range(b - 1, a - 1, -1):
            if np.isnan(out[i]) and i + period < len(out) and not np.isnan(out[i + period]):
                out[i] = out[i + period]
    still = np.isnan(out)
    if still.any():
        ok = ~still
        out[still] = np.interp(np.flatnonzero(still), np.flatnonzero(ok), out[ok])
    return out, long_gaps, int(missing.sum())


def _level_shifts(deseas: np.ndarray, period: int, threshold: float) -> list[tuple[int, float]]:
    """Sharp, lasting jumps of the deseasonalised series: (index, size).

    A jump is the difference of the day after and the day before; a step makes a triangle one
    day wide on each side (a trend makes a plateau: not sharp), and it must still hold one and
    two days later (a weekend dip does not).
    """
    n = len(deseas)
    if n < 2 * period + 1 or threshold <= 0:
        return []
    c = np.concatenate([[0.0], np.cumsum(deseas)])

    def day_mean(a: int) -> float:
        return (c[a + period] - c[a]) / period

    idx = np.arange(period, n - period + 1)
    d = (c[idx + period] - c[idx]) / period - (c[idx] - c[idx - period]) / period
    allowed = np.ones(len(idx), bool)
    found: list[tuple[int, float]] = []
    for _ in range(10):
        if len(found) >= MAX_LEVEL_SHIFTS or not allowed.any():
            break
        k = int(np.argmax(np.where(allowed, np.abs(d), -1.0)))
        h = float(d[k])
        if abs(h) < threshold:
            break
        t = int(idx[k])
        sharp = all(abs(d[j]) < 0.5 * abs(h) for j in (k - period, k + period) if 0 <= j < len(d))
        before, after = day_mean(t - period), day_mean(t)
        # Both levels must hold for up to two more days: a weekend dip recovers on Monday.
        lasting = (all(np.sign(day_mean(t + j * period) - before) == np.sign(h)
                       and abs(day_mean(t + j * period) - before) > 0.5 * abs(h)
                       for j in (1, 2) if t + (j + 1) * period <= n)
                   and all(np.sign(after - day_mean(t - (j + 1) * period)) == np.sign(h)
                           and abs(after - day_mean(t - (j + 1) * period)) > 0.5 * abs(h)
                           for j in (1, 2) if t - (j + 1) * period >= 0))
        lo, hi = max(0, k - period), min(len(d), k + period + 1)
        allowed[lo:hi] = False
        if sharp and lasting:
            found.append((t, h))
    return sorted(found)


def _jump(series: np.ndarray, at: int, period: int, all_at: list[int]) -> float:
    """Mean of the day after ``at`` minus the day before, each day cut short at other shifts."""
    lo = max([0] + [j for j in all_at if j < at] + [at - period])
    hi = min([len(series)] + [j for j in all_at if j > at] + [at + period])
    return float(series[at:hi].mean() - series[lo:at].mean())


def decompose(frame: pl.DataFrame, value_col: str, cfg: RhythmConfig | None = None, *,
              ts_col: str = "ts") -> Decomposition:
    """Decompose one column of a timeline into trend, daily, weekly and residual.

    Parameters
    ----------
    frame:
        A frame with ``ts_col`` (Datetime, UTC, the END of each step) and ``value_col``;
        nulls and NaNs are missing steps.
    value_col:
        The column to decompose (``rps``, ``gpus_batch``, ``activity_pct``, ``p99_ms`` ...).
    cfg:
        Resolution, band quantiles, gap and level-shift rules.

    Returns
    -------
    Decomposition

    Raises
    ------
    NotEnoughDataError
        Fewer than two days of data (a daily period needs more than two cycles), or more
        than half of the span missing.
    """
    cfg = cfg or RhythmConfig()
    t0 = time.perf_counter()
    notes: list[str] = []
    src = (frame.select(pl.col(ts_col).alias("ts"), pl.col(value_col).cast(pl.Float64).alias("v"))
           .filter(pl.col("ts").is_not_null())
           .with_columns(pl.col("v").fill_nan(None))
           .unique("ts", keep="last").sort("ts"))
    ts_dtype = src.schema["ts"]
    ts_ms = src["ts"].dt.epoch("ms").to_numpy().astype(np.int64)
    vals = src["v"].to_numpy().astype(float)
    if cfg.log_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = np.where(vals > 0, np.log(vals), np.nan)  # zero latency is no sample
    obs_ok = ~np.isnan(vals)
    if obs_ok.sum() < 3:
        raise NotEnoughDataError(f"{value_col}: {int(obs_ok.sum())} values; the rhythm needs "
                                 f"more than two days of data")
    step_s = float(np.median(np.diff(ts_ms[obs_ok]))) / 1000.0
    res_s = cfg.resolution_s if step_s <= cfg.resolution_s else _divisor_at_least(step_s)
    if res_s != cfg.resolution_s:
        notes.append(f"data step {step_s:g} s is coarser than the chosen resolution "
                     f"{cfg.resolution_s} s: decomposed at {res_s} s")
    res_ms = res_s * 1000
    # A bin (t - res, t] holds the steps ending inside it: the same end-of-step rule as ts.
    bins = ((ts_ms[obs_ok] + res_ms - 1) // res_ms) * res_ms
    grid = np.arange(bins[0], bins[-1] + res_ms, res_ms, dtype=np.int64)
    pos = ((bins - grid[0]) // res_ms).astype(np.int64)
    sums = np.bincount(pos, weights=vals[obs_ok], minlength=len(grid))
    counts = np.bincount(pos, minlength=len(grid))
    with np.errstate(invalid="ignore", divide="ignore"):
        y_obs = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    period = DAY_S // res_s
    n = len(grid)
    span_days = n * res_s / DAY_S
    if n <= 2 * period:
        raise NotEnoughDataError(
            f"{value_col}: {span_days:.1f} days of data; a daily rhythm needs more than 2 days "
            f"(load a longer range)")
    missing_share = float(np.isnan(y_obs).mean())
    if missing_share > 0.5:
        raise NotEnoughDataError(f"{value_col}: {missing_share:.0%} of the {span_days:.1f} days "
                                 f"have no data; the rhythm needs at least half")
    y, long_gaps, n_missing = _fill_gaps(y_obs, grid, res_s, period, cfg)
    if n_missing:
        short = n_missing - sum(int(g["hours"] * 3600 / res_s) for g in long_gaps)
        if short > 0:
            notes.append(f"{short} missing {res_s // 60}-min steps in gaps up to "
                         f"{cfg.max_fill_gap_s // 60} min filled by interpolation")
        for g in long_gaps:
            notes.append(f"long gap {g['start']} .. {g['end']} ({g['hours']} h) filled from the "
                         f"same time on the neighbouring day; its residual is not used")

    periods = [period]
    periods_used = ["daily"]
    weekly_period = 7 * period
    if cfg.weekly:
        if n > 2 * weekly_period:
            periods.append(weekly_period)
            periods_used.append("weekly")
        else:
            notes.append(f"the series spans {span_days:.1f} days; a weekly period needs more than "
                         f"14 days (MSTL drops a period of half the series or longer): daily "
                         f"period only, weekly component is zero")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trend, seasonal, _ = mstl_components(y, periods, robust=cfg.robust)
        # On a log scale a share of the level is a fixed log ratio.
        threshold = (math.log1p(cfg.level_shift_share) if cfg.log_scale
                     else cfg.level_shift_share * float(np.nanmean(np.abs(y_obs))))
        shifts = _level_shifts(y - seasonal.sum(axis=0), period, threshold)
        steps = np.zeros(n)
        sizes = [h for _, h in shifts]
        # The first pass's seasonal components soak up part of a step (a weekly period sees it
        # as a weekly pattern): re-estimate each step on the re-decomposed series.
        for _ in range(3 if shifts else 0):
            steps = np.zeros(n)
            for (i, _), h in zip(shifts, sizes):
                steps[i:] += h
            trend, seasonal, _ = mstl_components(y - steps, periods, robust=cfg.robust)
            rest = y - seasonal.sum(axis=0)
            sizes = [_jump(rest, i, period, [j for j, _ in shifts]) for i, _ in shifts]
        level_shifts: list[dict[str, Any]] = []
        for (i, _), h in zip(shifts, sizes):
            level_shifts.append({"at": _iso(grid[i] - res_ms), "size": round(h, 6)})
            notes.append(f"level shift of {h:+.4g} at {_iso(grid[i] - res_ms)} put into the trend")
        if shifts:
            steps = np.zeros(n)
            for (i, _), h in zip(shifts, sizes):
                steps[i:] += h
            trend, seasonal, _ = mstl_components(y - steps, periods, robust=cfg.robust)
            trend = trend + steps

    daily = seasonal[0]
    weekly = seasonal[1] if len(periods) > 1 else np.zeros(n)
    expected_c = trend + daily + weekly

    # Back to the input steps: a bin's mean sits at the centre of the steps it averaged.
    step_ms = step_s * 1000.0
    centres = grid - max(0.0, (res_ms - step_ms) / 2.0)
    comp = {name: np.interp(ts_ms, centres, arr) for name, arr in
            (("trend", trend), ("daily", daily), ("weekly", weekly))}
    expected = comp["trend"] + comp["daily"] + comp["weekly"]
    residual = vals - expected
    # Steps inside long gaps were never observed; steps that are observed count everywhere.
    usable = ~np.isnan(residual)
    if usable.sum() >= 2:
        q_lo, q_hi = (float(x) for x in np.quantile(residual[usable], [cfg.band_low_q, cfg.band_high_q]))
    else:
        q_lo = q_hi = 0.0
    back = np.exp if cfg.log_scale else (lambda a: a)
    out = pl.DataFrame({
        "ts": src["ts"], "observed": back(vals), "trend": comp["trend"], "daily": comp["daily"],
        "weekly": comp["weekly"], "residual": residual, "expected": back(expected),
        "lower": back(expected + q_lo), "upper": back(expected + q_hi),
    }).with_columns(pl.col("observed", "residual").fill_nan(None))
    if cfg.log_scale:
        notes.append("decomposed on a log scale: components are in log units, the band is "
                     "multiplicative")
    coarse = pl.DataFrame({
        "ts": pl.Series(grid, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")),
        "observed": back(y_obs), "filled": np.isnan(y_obs), "trend": trend, "daily": daily,
        "weekly": weekly, "residual": y_obs - expected_c, "expected": back(expected_c),
    }).with_columns(pl.col("observed", "residual").fill_nan(None))
    if isinstance(ts_dtype, pl.Datetime):
        coarse = coarse.with_columns(pl.col("ts").cast(pl.Datetime(ts_dtype.time_unit, ts_dtype.time_zone or "UTC")))
    return Decomposition(
        frame=out, coarse=coarse, periods_used=periods_used, notes=notes, resolution_s=res_s,
        input_step_s=step_s, value_col=value_col, band_offsets=(q_lo, q_hi), long_gaps=long_gaps,
        level_shifts=level_shifts, filled_steps=n_missing, elapsed_s=time.perf_counter() - t0,
        log_scale=cfg.log_scale)


def decompose_many(frame: pl.DataFrame, value_col: str, id_col: str,
                   cfg: RhythmConfig | None = None, *, ts_col: str = "ts") -> dict[str, Decomposition]:
    """:func:`decompose` per series of a long frame (``id_col`` names the series)."""
    out: dict[str, Decomposition] = {}
    for (key,), part in frame.sort(id_col).group_by(id_col, maintain_order=True):
        out[str(key)] = decompose(part, value_col, cfg, ts_col=ts_col)
    return out
