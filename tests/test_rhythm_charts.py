"""Rhythm figure builders: what each chart draws for a known rhythm, batch and p99 tail."""

from __future__ import annotations

import numpy as np
import polars as pl

from analytics.charts.rhythm import (decomposition_figure, hour_of_week_figure, profiles_figure,
                                     self_norm_figure)
from analytics.rhythm import RhythmConfig, decompose, hour_of_week, summarise
from test_rhythm import synth  # noqa: E402  (tests/ is on sys.path under pytest)


def _batch_for(traffic: pl.DataFrame) -> pl.DataFrame:
    mins = ((traffic["ts"].dt.epoch("s") - 60) % 86400) // 60
    return pl.DataFrame({"ts": traffic["ts"],
                         "gpus_batch": ((mins >= 120) & (mins < 570)).cast(pl.Float64) * 48.0})


def test_decomposition_figure_has_a_row_per_component() -> None:
    dec = decompose(synth(days=16), "rps")
    fig = decomposition_figure(dec, tz="Europe/Berlin")
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:5] == ["observed and norm band", "trend", "daily", "weekly", "residual"]
    assert {t.name for t in fig.data} >= {"observed", "expected", "norm band"}
    short = decomposition_figure(decompose(synth(days=5), "rps"))
    assert "weekly" not in [a.text for a in short.layout.annotations]


def test_profiles_figure_marks_tidal_window_and_collision() -> None:
    traffic = synth(peak_h=14.5, weekend=0.0, days=10)
    s = summarise(decompose(traffic, "rps"), RhythmConfig(), batch=_batch_for(traffic))
    fig = profiles_figure(s)
    assert [t.name for t in fig.data] == ["traffic (rps)", "batch GPUs held"]
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "tidal window" in texts and "collision" in texts
    tw, ramp = s.tidal_window, s.batch.ramp_window
    green = [sh for sh in fig.layout.shapes if sh.fillcolor.startswith("rgba(0,158,115")]
    orange = [sh for sh in fig.layout.shapes if sh.fillcolor.startswith("rgba(213,94,0")]
    assert sum(sh.x1 - sh.x0 for sh in green) == tw["hours"]
    assert [(sh.x0, sh.x1) for sh in orange] == [(ramp["start_hour"], ramp["end_hour"])]


def test_midnight_crossing_window_is_two_spans() -> None:
    s = summarise(decompose(synth(peak_h=14.0, weekend=0.0, days=10), "rps"), RhythmConfig())
    tw = s.tidal_window
    assert tw["start_hour"] > tw["end_hour"]
    spans = sorted((sh.x0, sh.x1) for sh in profiles_figure(s).layout.shapes)
    assert spans == [(0, tw["end_hour"]), (tw["start_hour"], 24)]


def test_hour_of_week_heatmaps_side_by_side() -> None:
    traffic = synth(days=14)
    fig = hour_of_week_figure(hour_of_week(traffic, "rps"), hour_of_week(_batch_for(traffic), "gpus_batch"))
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    z = np.array(fig.data[0].z, dtype=float)
    assert z.shape == (7, 24) and z[:5].mean() > z[5:].mean()  # the weekend dip shows


def test_self_norm_figure_counts_tail_steps_hidden_by_the_seasonal_band() -> None:
    f = synth(days=6, weekend=0.0, noise=0.0)
    mins = ((f["ts"].dt.epoch("s") - 60) % 86400) // 60
    rng = np.random.default_rng(1)
    base = np.where((mins >= 570) & (mins < 660), 400.0, 60.0)  # a 09:30-11:00 tail every day
    p99 = f.with_columns(pl.Series("p99_ms", base * np.exp(rng.normal(0, 0.1, f.height))))
    dec = decompose(p99, "p99_ms", RhythmConfig(log_scale=True))
    fig = self_norm_figure(dec, slo_ms=100.0, days=3)
    text = fig.layout.annotations[0].text
    above, inside = (int(x.split(" ")[0]) for x in text.split(";<br>")[:2])
    assert above == 3 * 90 and inside > 0.8 * above
    assert fig.layout.yaxis.type == "log"


def test_decomposition_figure_thins_only_its_smooth_lines() -> None:
    from analytics.charts.rhythm import SMOOTH_POINTS

    dec = decompose(synth(days=28), "rps")
    n = dec.coarse.height
    assert n > 2 * SMOOTH_POINTS  # else nothing here is thinned
    fig = decomposition_figure(dec)
    points = {t.name: len(t.x) for t in fig.data if t.name}
    assert points["observed"] == points["residual"] == n  # the spikes a reader looks for, every step
    for name in ("expected", "norm band", "trend", "daily", "weekly"):
        assert points[name] <= SMOOTH_POINTS + 1, name
    # the thinned lines still span the whole range, to the last step
    assert fig.data[1].x[-1] == fig.data[2].x[-1] and fig.data[1].x[0] == fig.data[2].x[0]
    band = [t for t in fig.data if t.name == "norm band"][0]
    upper = fig.data[0]
    assert len(upper.x) == len(band.x)  # the band's fill pairs its two edges point for point
