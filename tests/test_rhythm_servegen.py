"""The rhythm of a real production LLM trace (Alibaba ServeGen m-large, 14 days at 10 min)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analytics.rhythm import RhythmConfig, daily_profile, decompose, summarise
from analytics.ingest.servegen import ASSUMPTION_NOTE, SERVEGEN_ZONE
from servegen_rate import read_servegen_rate

FIXTURE = Path(__file__).parent / "fixtures" / "servegen_m_large_rate.csv"
RAW = Path("/work/shared/data/real/servegen-m-large")


@pytest.fixture(scope="module")
def traffic() -> pl.DataFrame:
    return read_servegen_rate(FIXTURE)


def test_fixture_is_the_sum_over_clients(traffic: pl.DataFrame) -> None:
    assert traffic.height == 2016  # 14 days of 10-minute bins
    assert traffic["ts"].dt.epoch("s").diff().drop_nulls().unique().to_list() == [600]
    if RAW.is_dir():  # the shared copy is not part of the repo; check the aggregate when present
        raw = read_servegen_rate(RAW)
        assert raw["rps"].to_list() == pytest.approx(traffic["rps"].to_list(), rel=1e-6)


def test_peak_and_trough_hours_agree_with_a_direct_hour_of_day_mean(traffic: pl.DataFrame) -> None:
    cfg = RhythmConfig(timezone=SERVEGEN_ZONE)
    dec = decompose(traffic, "rps", cfg)
    s = summarise(dec, cfg, extra_notes=[ASSUMPTION_NOTE])
    direct = daily_profile(traffic, "rps", SERVEGEN_ZONE)
    assert s.peak_hour == direct["hour"][direct["mean"].arg_max()]
    assert s.trough_hour == direct["hour"][direct["mean"].arg_min()]
    # 14 days is exactly two weeks: MSTL would drop the weekly period, and so do we, saying so.
    assert dec.periods_used == ["daily"]
    assert any("daily period only" in n for n in s.notes)
    assert any("assumed" in n for n in s.notes)
    assert 0.5 < s.trough_to_peak < 0.9
    assert s.timezone == SERVEGEN_ZONE


def test_tidal_window_at_a_share_this_trace_reaches(traffic: pl.DataFrame) -> None:
    cfg = RhythmConfig(timezone=SERVEGEN_ZONE, tidal_share=0.8)
    s = summarise(decompose(traffic, "rps", cfg), cfg)
    tw = s.tidal_window
    assert tw is not None
    hours = [(tw["start_hour"] + k) % 24 for k in range(tw["hours"])]
    assert s.trough_hour in hours
    prof = s.profile
    assert all(prof[h] < 0.8 * max(prof) for h in hours)
