"""Long ranges of many GPUs run the device pass in windows of steps: the same timelines as one
pass (to the last bit of a float sum), on the simulator's store and with time-sliced GPUs."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

import analytics.timeline.pool as tp
from analytics.sample.export import load_into
from analytics.sample.sim import simulate
from analytics.store import Store
from analytics.timeline import TimelineConfig, timelines


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory):
    # "mixed" has MIG slices and time-sliced GPUs: the one decision taken over the whole range.
    db = tmp_path_factory.mktemp("windows") / "mixed.duckdb"
    with Store(db) as st:
        load_into(st, simulate("mixed", days=2, gpus=16, seed=5))
    with Store(db, read_only=True) as st:
        yield st


@pytest.mark.parametrize("step_s", [60, 300])
def test_windowed_pass_equals_one_pass(mixed_store, monkeypatch: pytest.MonkeyPatch, step_s: int) -> None:
    cfg = TimelineConfig(step_s=step_s)
    whole = timelines(mixed_store, cfg)
    n_gpus = mixed_store.series("DCGM_FI_DEV_GPU_UTIL").height
    # About 7 windows of the 2 days: more than one, cut at step boundaries.
    monkeypatch.setattr(tp, "WINDOW_INST_STEPS", n_gpus * (2 * 1440 * 60 // step_s) // 7)
    assert len(tp._windows({"step_ms": step_s * 1000, "lo_ms": 0, "hi_ms": 2 * 86_400_000}, n_gpus)) >= 5
    cut = timelines(mixed_store, cfg)
    for name in ("pool", "holdings", "services"):
        a, b = getattr(whole, name), getattr(cut, name)
        assert a.height > 0, name
        keys = [c for c in a.columns if a[c].dtype.is_temporal() or not a[c].dtype.is_float()]
        assert_frame_equal(a.sort(keys), b.sort(keys), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
