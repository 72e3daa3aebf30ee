"""Recovery of the simulator's injected rhythm (``analytics.sample``): traffic shape and batch."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analytics.sample import sim
from analytics.rhythm import RhythmConfig, daily_profile, decompose, summarise  # noqa: E402
from analytics.sample.traffic import rhythm  # noqa: E402

DAYS = 8


@pytest.fixture(scope="module")
def run():
    return sim.simulate("morning", days=DAYS, gpus=32, seed=7)


def _frame(run, values: np.ndarray, name: str) -> pl.DataFrame:
    ts = run.start_ms + (np.arange(len(values)) + 1) * 60_000  # a minute's value at its end
    return pl.DataFrame({"ts": pl.Series(ts).cast(pl.Datetime("ms", "UTC")), name: values})


def test_recovers_the_injected_daily_amplitude_and_peak_hour(run) -> None:
    svc = run.scenario.services[0]
    traffic = _frame(run, run.full.rate_rps[svc.name], "rps")  # with noise, surges, weekends
    truth = _frame(run, rhythm(svc, run.scenario, DAYS) * svc.peak_rps, "rps")
    dec = decompose(traffic, "rps")
    s = summarise(dec, RhythmConfig())
    injected = daily_profile(truth, "rps", "UTC")["mean"].to_numpy()
    recovered = np.array(s.profile)
    amp_in = (injected.max() - injected.min()) / 2
    amp_out = (recovered.max() - recovered.min()) / 2
    # Tolerance: 10% of the injected daily amplitude (surges and AR(1) noise ride on it), and
    # the peak hour within one hour (the afternoon plateau varies by only 6%).
    assert amp_out == pytest.approx(amp_in, rel=0.10)
    assert min(abs(s.peak_hour - int(injected.argmax())), 24 - abs(s.peak_hour - int(injected.argmax()))) <= 1
    # The night is a flat trough (00-07 UTC): the recovered trough hour must lie in it.
    assert injected[s.trough_hour] <= injected.min() + 0.1 * amp_in
    # The ramp at 09:00 UTC: the recovered profile rises through it as the injected one does.
    assert np.corrcoef(recovered, injected)[0, 1] > 0.98


def test_batch_start_hold_and_ramp_collision_match_the_injected_finetune(run) -> None:
    batch_idx = np.array([p.klass == "batch" for p in run.full.pool.pods] + [False])
    holders = run.full.pool.holders
    gpus_batch = batch_idx[np.where(holders >= 0, holders, -1)].sum(axis=1).astype(float)
    svc = run.scenario.services[0]
    s = summarise(decompose(_frame(run, run.full.rate_rps[svc.name], "rps"), "rps"), RhythmConfig(),
                  batch=_frame(run, gpus_batch, "gpus_batch"))
    b = s.batch
    assert b is not None
    # The fine-tune is submitted at 02:00 UTC and runs 8-9 hours (BatchConfig defaults).
    assert b.typical_start_hour == pytest.approx(run.scenario.batch.finetune_hour_utc, abs=1.0)
    assert 6.0 <= b.median_hold_h <= 10.0
    # It still holds GPUs when the 09:00 ramp starts on most days: the collision.
    assert b.ramp_window is not None
    assert b.collision_days >= b.days // 2
