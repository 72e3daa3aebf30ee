"""The numbers a capacity review asks of a rhythm: peak and trough hour, tidal window, weekday vs
weekend, and when batch starts, how long it holds and how much of the morning ramp it overlaps.

Hours are local to ``RhythmConfig.timezone``. A step belongs to the hour in which it starts
(``ts - step``), since ``ts`` is the end of the step. Windows are ``[start, end)`` and may cross
midnight (``start > end``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl

from analytics.measures import over_slo
from analytics.rhythm.config import RhythmConfig
from analytics.rhythm.decompose import Decomposition
from analytics.units import hour_text

WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _step_s(frame: pl.DataFrame, ts_col: str) -> float:
    ts = frame[ts_col].drop_nulls().sort().dt.epoch("ms").to_numpy()
    return float(np.median(np.diff(ts))) / 1000.0 if len(ts) > 1 else 60.0


def with_local_time(frame: pl.DataFrame, tz: str, *, step_s: float | None = None,
                    ts_col: str = "ts") -> pl.DataFrame:
    """Add ``local_hour`` (0-23), ``weekday`` (1 = Monday .. 7) and ``local_date`` of each step's start."""
    step = _step_s(frame, ts_col) if step_s is None else step_s
    start = (pl.col(ts_col) - pl.duration(milliseconds=int(round(step * 1000)))).dt.convert_time_zone(tz)
    return frame.with_columns(start.dt.hour().alias("local_hour"), start.dt.weekday().alias("weekday"),
                              start.dt.date().alias("local_date"))


def daily_profile(frame: pl.DataFrame, value_col: str, tz: str = "UTC", *,
                  step_s: float | None = None, ts_col: str = "ts") -> pl.DataFrame:
    """Mean of ``value_col`` per local hour of day: ``hour, mean`` (24 rows, null where no data)."""
    local = with_local_time(frame.filter(pl.col(value_col).is_not_null()), tz, step_s=step_s,
                            ts_col=ts_col)
    means = local.group_by("local_hour").agg(pl.col(value_col).mean().alias("mean"))
    hours = pl.DataFrame({"hour": pl.int_range(0, 24, eager=True).cast(pl.Int8)})
    return hours.join(means.rename({"local_hour": "hour"}).with_columns(pl.col("hour").cast(pl.Int8)),
                      on="hour", how="left").sort("hour")


def hour_of_week(frame: pl.DataFrame, value_col: str, tz: str = "UTC", *,
                 step_s: float | None = None, ts_col: str = "ts") -> pl.DataFrame:
    """Mean of ``value_col`` per local weekday and hour: ``weekday`` (1 = Mon), ``hour``, ``mean``."""
    local = with_local_time(frame.filter(pl.col(value_col).is_not_null()), tz, step_s=step_s,
                            ts_col=ts_col)
    return (local.group_by("weekday", "local_hour").agg(pl.col(value_col).mean().alias("mean"))
            .rename({"local_hour": "hour"}).sort("weekday", "hour"))


def self_norm_counts(frame: pl.DataFrame, slo_ms: float) -> tuple[int, int]:
    """Of a p99 decomposition's steps (``observed``, ``upper``): how many are over the SLO
    (:func:`analytics.measures.over_slo`), and how many of those sit inside p99's own seasonal
    band, where a seasonal baseline would call them normal.

    >>> self_norm_counts(pl.DataFrame({"observed": [50.0, 150.0, 300.0, None], "upper": [60.0, 200.0, 200.0, 1.0]}), 100.0)
    (2, 1)
    """

    observed = frame["observed"].cast(pl.Float64).to_numpy()
    above = over_slo(observed, slo_ms)
    inside = above & (np.nan_to_num(observed, nan=np.inf) <= frame["upper"].cast(pl.Float64).fill_null(-np.inf).to_numpy())
    return int(above.sum()), int(inside.sum())


def tidal_window(profile: list[float | None], share: float) -> tuple[int, int] | None:
    """The longest run of hours (circular) whose profile stays below ``share`` of its peak.

    >>> tidal_window([1.0, 1.0] + [10.0] * 20 + [1.0, 1.0], 0.5)  # crosses midnight
    (22, 2)
    >>> tidal_window([10] * 24, 0.5) is None
    True
    """
    vals = [v for v in profile if v is not None and not math.isnan(v)]
    if not vals:
        return None
    peak = max(vals)
    below = [v is not None and not math.isnan(v) and v < share * peak for v in profile]
    if not any(below) or all(below):
        return None
    n = len(below)
    best: tuple[int, int] | None = None
    best_len = 0
    for start in range(n):
        if below[start] and not below[start - 1]:
            length = 0
            while length < n and below[(start + length) % n]:
                length += 1
            if length > best_len:
                best, best_len = (start, (start + length) % n), length
    return best


def _in_window(hour: int, start: int, end: int) -> bool:
    return start <= hour < end if start < end else (hour >= start or hour < end)


def _window_hours(start: int, end: int) -> int:
    return (end - start) % 24 or 24


def _circular_mean_hour(hours: np.ndarray) -> float | None:
    if len(hours) == 0:
        return None
    ang = hours * 2 * np.pi / 24
    return float((np.angle(np.mean(np.exp(1j * ang))) * 24 / (2 * np.pi)) % 24)


@dataclass
class BatchSummary:
    """When batch starts, how long it holds GPUs, and how much of the morning ramp it overlaps."""

    signal: str
    runs: int
    typical_start_hour: float | None
    median_hold_h: float | None
    ramp_window: dict[str, int] | None
    ramp_overlap_share: float | None
    collision_days: int
    days: int
    profile: list[float | None] = field(default_factory=list)


@dataclass
class RhythmSummary:
    """The per-signal numbers of ``tidelens rhythm --json``."""

    signal: str
    timezone: str
    peak_hour: int | None
    trough_hour: int | None
    peak_value: float | None
    trough_value: float | None
    trough_to_peak: float | None
    tidal_window: dict[str, Any] | None
    weekday_mean: float | None
    weekend_mean: float | None
    weekend_to_weekday: float | None
    periods_used: list[str]
    resolution_s: int
    notes: list[str]
    profile: list[float | None]
    batch: BatchSummary | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), nd)


def ramp_window(profile: list[float | None], cfg: RhythmConfig) -> tuple[int, int] | None:
    """The morning ramp ``[start, end)``: from the tidal window's end until the profile first
    reaches ``ramp_top_share`` of its peak (that hour included), unless the config sets it."""
    if cfg.ramp_start_hour is not None and cfg.ramp_end_hour is not None:
        return cfg.ramp_start_hour, cfg.ramp_end_hour
    vals = [v for v in profile if v is not None]
    if not vals:
        return None
    peak = max(vals)
    tw = tidal_window(profile, cfg.tidal_share)
    if cfg.ramp_start_hour is not None:
        start = cfg.ramp_start_hour
    elif tw is not None:
        start = tw[1]
    else:
        start = (int(np.nanargmin([np.nan if v is None else v for v in profile])) + 1) % 24
    if cfg.ramp_end_hour is not None:
        return start, cfg.ramp_end_hour
    for k in range(24):
        h = (start + k) % 24
        v = profile[h]
        if v is not None and v >= cfg.ramp_top_share * peak:
            return start, (h + 1) % 24
    return None


def summarise_batch(batch: pl.DataFrame, batch_col: str, traffic_profile: list[float | None],
                    cfg: RhythmConfig, *, ts_col: str = "ts") -> BatchSummary:
    """Batch holding runs and their collision with the traffic's morning ramp.

    Parameters
    ----------
    batch:
        A frame with ``ts_col`` and ``batch_col`` (GPUs held by batch per step).
    traffic_profile:
        The traffic's 24-hour profile (local hours), which sets the ramp window.
    """
    frame = batch.select(pl.col(ts_col).alias("ts"), pl.col(batch_col).cast(pl.Float64).alias("v")) \
        .drop_nulls().sort("ts")
    step = _step_s(frame, "ts")
    local = with_local_time(frame, cfg.timezone, step_s=step)
    vmax = float(local["v"].max() or 0.0)
    holding = (local["v"] > cfg.batch_hold_share * vmax).to_numpy() if vmax > 0 else np.zeros(local.height, bool)
    ts_ms = local["ts"].dt.epoch("ms").to_numpy()
    # A run breaks where batch stops holding or where the data has a hole longer than a step.
    breaks = np.concatenate([[True], np.diff(ts_ms) > 1.5 * step * 1000])
    starts, holds = [], []
    i, n = 0, len(holding)
    while i < n:
        if holding[i] and (i == 0 or not holding[i - 1] or breaks[i]):
            j = i
            while j + 1 < n and holding[j + 1] and not breaks[j + 1]:
                j += 1
            starts.append(i)
            holds.append((ts_ms[j] - ts_ms[i]) / 3.6e6 + step / 3600)
            i = j + 1
        else:
            i += 1
    start_hours = (local["local_hour"].to_numpy()[starts]
                   + ((ts_ms[starts] - step * 1000) % 3_600_000) / 3.6e6) if starts else np.array([])
    ramp = ramp_window(traffic_profile, cfg)
    overlap, collisions, days = None, 0, 0
    if ramp is not None:
        in_ramp = np.array([_in_window(int(h), ramp[0], ramp[1]) for h in local["local_hour"].to_numpy()])
        if in_ramp.any():
            overlap = float(holding[in_ramp].mean())
            first = local.with_columns(pl.Series("hold", holding)).filter(
                pl.col("local_hour") == ramp[0]).group_by("local_date").agg(pl.col("hold").first())
            days = first.height
            collisions = int(first["hold"].sum())
    profile = daily_profile(local, "v", cfg.timezone, step_s=step)["mean"].to_list()
    return BatchSummary(
        signal=batch_col, runs=len(starts), typical_start_hour=_round(_circular_mean_hour(start_hours), 2),
        median_hold_h=_round(float(np.median(holds)) if holds else None, 2),
        ramp_window=None if ramp is None else {"start_hour": ramp[0], "end_hour": ramp[1]},
        ramp_overlap_share=_round(overlap), collision_days=collisions, days=days,
        profile=[_round(v) for v in profile])


def summarise(decomp: Decomposition, cfg: RhythmConfig | None = None, *,
              batch: pl.DataFrame | None = None, batch_col: str = "gpus_batch",
              signal: str | None = None, extra_notes: list[str] | None = None) -> RhythmSummary:
    """Summarise a decomposition for a meeting.

    The 24-hour profile is the mean of the model's ``expected`` value (trend + daily + weekly)
    per local hour, so a one-off surge does not move the peak; weekday and weekend means are
    of the observed values.
    """
    cfg = cfg or RhythmConfig()
    tz = cfg.timezone
    profile_f = daily_profile(decomp.frame, "expected", tz, step_s=decomp.input_step_s)
    profile = profile_f["mean"].to_list()
    vals = np.array([np.nan if v is None else v for v in profile])
    peak_h = trough_h = None
    peak = trough = ratio = None
    if not np.all(np.isnan(vals)):
        peak_h, trough_h = int(np.nanargmax(vals)), int(np.nanargmin(vals))
        peak, trough = float(vals[peak_h]), float(vals[trough_h])
        ratio = trough / peak if peak > 0 and trough >= 0 else None
    tw = tidal_window(profile, cfg.tidal_share)
    local = with_local_time(decomp.frame.filter(pl.col("observed").is_not_null()), tz,
                            step_s=decomp.input_step_s)
    # A mean over less than a day of steps (a range that just touches a Sunday) says nothing.
    steps_per_day = 86400 / max(decomp.input_step_s, 1.0)
    wk_obs = local.filter(pl.col("weekday") <= 5)["observed"]
    we_obs = local.filter(pl.col("weekday") >= 6)["observed"]
    wk = wk_obs.mean() if wk_obs.len() >= 0.9 * steps_per_day else None
    we = we_obs.mean() if we_obs.len() >= 0.9 * steps_per_day else None
    notes = list(decomp.notes) + list(extra_notes or [])
    batch_summary = None
    if batch is not None and batch.height:
        batch_summary = summarise_batch(batch, batch_col, profile, cfg)
    return RhythmSummary(
        signal=signal or decomp.value_col, timezone=tz, peak_hour=peak_h, trough_hour=trough_h,
        peak_value=_round(peak), trough_value=_round(trough), trough_to_peak=_round(ratio),
        tidal_window=None if tw is None else {"start_hour": tw[0], "end_hour": tw[1],
                                              "hours": _window_hours(*tw), "share_of_peak": cfg.tidal_share},
        weekday_mean=_round(wk), weekend_mean=_round(we),
        weekend_to_weekday=_round(we / wk) if wk and we is not None and wk > 0 else None,
        periods_used=decomp.periods_used, resolution_s=decomp.resolution_s, notes=notes,
        profile=[_round(v) for v in profile], batch=batch_summary)


def rhythm_headline(s: RhythmSummary, signal_label: str) -> str:
    """The Rhythm page's answer in one sentence (the review's finding too): when the signal peaks,
    and when batch starts and how often it still held GPUs into the morning ramp; every hour as a
    clock reads it (:func:`analytics.units.hour_text`, never truncated to the hour).
    """
    finding = f"{signal_label} peaks at {hour_text(s.peak_hour)} ({s.timezone})"
    b = s.batch
    if b is None:
        return finding + "; no batch holdings in its pool to collide with."
    return (finding + f"; batch typically starts at {hour_text(b.typical_start_hour)} and still held GPUs "
            f"into the morning ramp on {b.collision_days} of {b.days} days.")
