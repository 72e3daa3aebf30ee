"""Rhythm decomposition: recovery of an injected rhythm, gaps, short series, level shifts, band."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analytics.rhythm import (RhythmConfig, decompose, norm_band, summarise, tidal_window)
from analytics.errors import ConfigError, NotEnoughDataError

# A Monday 00:00 UTC, so weekday arithmetic in the fixtures is plain.
T0_MS = 1_700_438_400_000


def synth(days: float = 28, step_s: int = 60, amp: float = 40.0, peak_h: float = 9.5,
          base: float = 100.0, weekend: float = -15.0, noise: float = 5.0, seed: int = 0) -> pl.DataFrame:
    """Traffic with a cosine daily rhythm (``amp`` around ``base``, peak at ``peak_h`` UTC)."""
    n = int(days * 86400 // step_s)
    t = np.arange(1, n + 1) * step_s  # step ends
    mid_h = ((t - step_s / 2) % 86400) / 3600
    dow = ((t - 1) // 86400) % 7
    rng = np.random.default_rng(seed)
    y = base + amp * np.cos(2 * np.pi * (mid_h - peak_h) / 24) + np.where(dow >= 5, weekend, 0.0)
    y = y + rng.normal(0, noise, n)
    ts = pl.Series(T0_MS + t * 1000, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC"))
    return pl.DataFrame({"ts": ts, "rps": y})


def first_harmonic(dec) -> tuple[float, float]:
    """Amplitude and peak hour (UTC) of the daily component's 24-hour harmonic."""
    c = dec.coarse
    mid_h = ((c["ts"].dt.epoch("s").to_numpy() - dec.resolution_s / 2) % 86400) / 3600
    z = 2 * np.mean(c["daily"].to_numpy() * np.exp(-2j * np.pi * mid_h / 24))
    return float(abs(z)), float((-np.angle(z) * 24 / (2 * np.pi)) % 24)


@pytest.mark.parametrize("step_s", [60, 300])
def test_recovers_injected_daily_amplitude_and_peak_hour(step_s: int) -> None:
    dec = decompose(synth(step_s=step_s, amp=40.0, peak_h=9.5), "rps")
    amp, peak_h = first_harmonic(dec)
    # Tolerance: 5% of the amplitude, a quarter hour of phase.
    assert amp == pytest.approx(40.0, rel=0.05)
    assert abs(peak_h - 9.5) < 0.25
    assert dec.periods_used == ["daily", "weekly"]
    # The weekend dip (-15 on 2 of 7 days) lands in the weekly component, not the daily.
    w = dec.frame.with_columns(((pl.col("ts").dt.epoch("ms") - 1 - T0_MS) // 86_400_000 % 7).alias("dow"))
    weekend = w.filter(pl.col("dow") >= 5)["weekly"].mean()
    weekday = w.filter(pl.col("dow") < 5)["weekly"].mean()
    assert weekday - weekend == pytest.approx(15.0, abs=2.0)


def test_expected_tracks_the_truth_and_band_covers_its_quantiles() -> None:
    noisy = synth(noise=5.0)
    clean = synth(noise=0.0)
    dec = decompose(noisy, "rps", RhythmConfig(band_low_q=0.05, band_high_q=0.95))
    err = dec.frame["expected"].to_numpy() - clean["rps"].to_numpy()
    assert np.sqrt(np.mean(err ** 2)) < 2.0  # noise sd is 5
    f = dec.frame
    inside = ((f["observed"] >= f["lower"]) & (f["observed"] <= f["upper"])).mean()
    assert inside == pytest.approx(0.90, abs=0.02)
    assert set(f.columns) == {"ts", "observed", "trend", "daily", "weekly", "residual", "expected",
                              "lower", "upper"}
    assert np.allclose(f["expected"], f["trend"] + f["daily"] + f["weekly"])


def test_short_series_falls_back_to_daily_only_and_says_so() -> None:
    dec = decompose(synth(days=10, weekend=0.0), "rps")
    assert dec.periods_used == ["daily"]
    assert any("weekly period needs more than 14 days" in n for n in dec.notes)
    assert (dec.frame["weekly"] == 0).all()
    s = summarise(dec)
    assert s.as_dict()["periods_used"] == ["daily"]
    assert any("daily period only" in n for n in s.as_dict()["notes"])


def test_under_two_days_is_refused_with_a_message() -> None:
    with pytest.raises(NotEnoughDataError, match="more than 2 days"):
        decompose(synth(days=1.5), "rps")


def test_short_gaps_are_filled_and_long_gaps_reported() -> None:
    f = synth(days=21).with_row_index("i")
    day = 1440
    short = (pl.col("i") >= 5 * day + 600) & (pl.col("i") < 5 * day + 630)  # 30 min
    long_ = (pl.col("i") >= 9 * day + 480) & (pl.col("i") < 9 * day + 840)  # 6 h, the morning
    holed = f.filter(~short & ~long_).drop("i")
    dec = decompose(holed, "rps")
    assert dec.frame.height == holed.height
    assert any("filled by interpolation" in n for n in dec.notes)
    assert len(dec.long_gaps) == 1 and dec.long_gaps[0]["hours"] == pytest.approx(6.0, abs=0.2)
    assert dec.coarse["filled"].sum() == pytest.approx(39, abs=2)  # 3 + 36 ten-minute bins
    # The rhythm is still recovered, and the model's value inside the long gap is plausible.
    amp, peak_h = first_harmonic(dec)
    assert amp == pytest.approx(40.0, rel=0.05) and abs(peak_h - 9.5) < 0.25
    truth = synth(days=21, noise=0.0).with_row_index("i").filter(long_)
    gap_model = dec.coarse.join(truth.select(pl.col("ts").cast(dec.coarse.schema["ts"]), "rps"), on="ts")
    assert (gap_model["expected"] - gap_model["rps"]).abs().mean() < 5.0


def test_more_than_half_missing_is_refused() -> None:
    f = synth(days=10).with_row_index("i").filter(pl.col("i") % 1440 < 500).drop("i")
    with pytest.raises(NotEnoughDataError, match="no data"):
        decompose(f, "rps")


def test_level_shift_goes_into_the_trend() -> None:
    f = synth(days=21).with_row_index("i")
    at = 10 * 1440 + 300
    f = f.with_columns(pl.when(pl.col("i") >= at).then(pl.col("rps") + 60).otherwise(pl.col("rps"))).drop("i")
    dec = decompose(f, "rps")
    assert len(dec.level_shifts) == 1
    assert dec.level_shifts[0]["size"] == pytest.approx(60, rel=0.15)
    shift_ts = f["ts"][at]
    # Residual the day after the shift stays centred: the trend followed the step at once.
    after = dec.frame.filter((pl.col("ts") > shift_ts) & (pl.col("ts") <= shift_ts + pl.duration(days=1)))
    assert abs(after["residual"].mean()) < 3.0
    assert any("level shift" in n for n in dec.notes)


def test_weekend_dip_is_not_a_level_shift() -> None:
    dec = decompose(synth(days=12, weekend=-40.0), "rps")
    assert dec.level_shifts == []


def test_norm_band_contract_single_and_per_series() -> None:
    f = synth(days=15)
    band = norm_band(f, "rps")
    assert band.columns == ["ts", "expected", "lower", "upper"]
    assert band["ts"].to_list() == f["ts"].to_list()
    assert ((band["lower"] < band["expected"]) & (band["expected"] < band["upper"])).all()
    two = pl.concat([f.with_columns(pl.lit("a").alias("service")),
                     synth(days=15, base=500.0).with_columns(pl.lit("b").alias("service"))])
    both = norm_band(two, "rps", id_col="service")
    assert both.columns == ["ts", "service", "expected", "lower", "upper"]
    means = both.group_by("service").agg(pl.col("expected").mean()).sort("service")["expected"].to_list()
    assert means[0] == pytest.approx(100 - 15 * 2 / 7, abs=3) and means[1] == pytest.approx(500 - 15 * 2 / 7, abs=3)


def test_summary_hours_zone_and_midnight_crossing_tidal_window() -> None:
    dec = decompose(synth(peak_h=14.5), "rps")
    s = summarise(dec, RhythmConfig(timezone="UTC", tidal_share=0.5))
    assert s.peak_hour == 14 and s.trough_hour == 2
    tw = s.tidal_window
    assert tw is not None and tw["start_hour"] > tw["end_hour"]  # crosses midnight
    assert tw["start_hour"] in (23, 0) or tw["start_hour"] >= 22
    assert s.trough_to_peak == pytest.approx(60 / 140, abs=0.03)
    assert s.weekend_to_weekday == pytest.approx(85 / 100, abs=0.02)
    # The same rhythm shown in Asia/Tokyo (UTC+9) moves by nine hours.
    tokyo = summarise(dec, RhythmConfig(timezone="Asia/Tokyo"))
    assert tokyo.peak_hour == (14 + 9) % 24 and tokyo.timezone == "Asia/Tokyo"
    d = s.as_dict()
    for key in ("peak_hour", "trough_hour", "trough_to_peak", "tidal_window", "timezone"):
        assert key in d


def test_tidal_window_edges() -> None:
    assert tidal_window([1.0] * 6 + [10.0] * 18, 0.5) == (0, 6)
    assert tidal_window([10.0] * 24, 0.5) is None


def test_batch_start_hold_and_ramp_collision() -> None:
    traffic = synth(peak_h=14.0, weekend=0.0)
    ts = traffic["ts"]
    mins = ((ts.dt.epoch("s") - 60) % 86400) // 60
    held = ((mins >= 120) & (mins < 570)).cast(pl.Float64) * 48.0  # 02:00-09:30, 48 GPUs
    batch = pl.DataFrame({"ts": ts, "gpus_batch": held})
    s = summarise(decompose(traffic, "rps"), RhythmConfig(), batch=batch)
    b = s.batch
    assert b is not None and b.runs == 28
    assert b.typical_start_hour == pytest.approx(2.0, abs=0.05)
    assert b.median_hold_h == pytest.approx(7.5, abs=0.05)
    ramp = b.ramp_window
    assert ramp is not None and ramp["start_hour"] < 9 < ramp["end_hour"]
    assert b.collision_days == b.days == 28
    assert 0.3 < b.ramp_overlap_share < 1.0


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="divisor"):
        RhythmConfig(resolution_s=700)
    with pytest.raises(ConfigError, match="IANA"):
        RhythmConfig(timezone="Mars/Olympus")


def test_log_scale_band_is_multiplicative_and_positive() -> None:
    f = synth(days=10, weekend=0.0, noise=0.0)
    rng = np.random.default_rng(3)
    f = f.with_columns((pl.col("rps") * np.exp(rng.normal(0, 0.1, f.height))).alias("p99_ms"))
    dec = decompose(f, "p99_ms", RhythmConfig(log_scale=True))
    out = dec.frame
    assert (out["lower"] > 0).all()
    assert np.allclose(out["upper"] / out["expected"], np.exp(dec.band_offsets[1]))
    assert np.allclose(out["observed"], f["p99_ms"])
    lower, upper = dec.coarse_band()
    assert (upper > dec.coarse["expected"]).all() and (lower < dec.coarse["expected"]).all()
    assert any("log scale" in n for n in dec.notes)


def test_norm_band_does_not_learn_surges_on_two_mornings_of_a_week() -> None:
    """A week (1-min steps, Monday start) whose Monday and Tuesday mornings run 2x: the norm at
    those mornings stays the typical morning's, and the surges lie above the band. Without
    leaving them out of the fit (``norm_surge_sd=None``) MSTL's daily component, which follows
    its neighbouring days, calls Monday's 2x morning normal."""
    import numpy as np

    t = np.arange(7 * 1440)
    minute = t % 1440
    ramp = (minute >= 8 * 60) & (minute < 13 * 60)
    clean = 10 + 30 * np.sin(np.pi * (minute - 8 * 60) / 300) * ramp + 5 * np.sin(2 * np.pi * minute / 1440)
    rng = np.random.default_rng(3)
    rps = clean * (1 + 0.03 * rng.standard_normal(t.size))
    surged = (minute >= 9 * 60) & (minute < 11 * 60) & (t < 2 * 1440)
    rps[surged] *= 2.0
    f = pl.DataFrame({"ts": pl.Series((t + 1) * 60_000 + 1_791_158_400_000).cast(pl.Datetime("ms", "UTC")),
                      "rps": rps})
    band = norm_band(f, "rps")
    mon = np.flatnonzero(surged & (t < 1440))
    assert np.median(band["expected"].to_numpy()[mon] / clean[mon]) == pytest.approx(1.0, abs=0.1)
    assert (band["upper"].to_numpy()[mon] < rps[mon]).mean() > 0.95
    plain = norm_band(f, "rps", RhythmConfig(norm_surge_sd=None))
    assert np.median(plain["expected"].to_numpy()[mon] / clean[mon]) > 1.5
