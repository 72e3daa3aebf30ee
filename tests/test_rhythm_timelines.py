"""The Rhythm's data from the timelines the app already has: the same rhythm as reading the
store again, no second pass over it, and the workload map the other pages use."""

from __future__ import annotations

import pytest

import analytics.timeline as timeline_mod  # noqa: E402
from analytics.rhythm import RhythmConfig  # noqa: E402
from analytics.rhythm.digest import rhythm_page_data  # noqa: E402
from analytics.sample import sim
from analytics.sample.export import load_into  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.timeline import TimelineConfig, timelines  # noqa: E402
from analytics.workloads import Rule, WorkloadMap  # noqa: E402


@pytest.fixture(scope="module")
def pool_store(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("rhythm_tl") / "morning.duckdb"
    with Store(db) as s:
        load_into(s, sim.simulate("morning", days=4, gpus=16, seed=3))
    with Store(db, read_only=True) as s:
        yield s


def _batch_gpu_hours(data) -> float:
    return float(data.batch_how["mean"].sum()) if data.batch_how is not None else 0.0


def test_given_timelines_give_the_same_rhythm_without_reading_them_again(
        pool_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = RhythmConfig(resolution_s=600)
    alone = rhythm_page_data(pool_store, cfg, step_s=60)
    shared = timelines(pool_store, TimelineConfig(step_s=60))

    def no_second_pass(*args, **kwargs):
        raise AssertionError("the store's timelines were built again")

    monkeypatch.setattr(timeline_mod, "pool_timeline", no_second_pass)
    monkeypatch.setattr(timeline_mod, "service_timeline", no_second_pass)
    given = rhythm_page_data(pool_store, cfg, step_s=60, timelines=shared)
    assert [s.name for s in given.signals] == [s.name for s in alone.signals]
    assert given.chosen.signal == alone.chosen.signal
    assert given.chosen.summary.profile == pytest.approx(alone.chosen.summary.profile)
    assert given.chosen.summary.batch.median_hold_h == pytest.approx(alone.chosen.summary.batch.median_hold_h)
    assert _batch_gpu_hours(given) == pytest.approx(_batch_gpu_hours(alone)) and _batch_gpu_hours(alone) > 0


def test_the_workload_map_decides_what_counts_as_batch(pool_store: Store) -> None:
    cfg = RhythmConfig(resolution_s=600)
    default = rhythm_page_data(pool_store, cfg, step_s=60)
    # A map that calls every training pod inference: the batch holdings are gone.
    wmap = WorkloadMap(rules=[Rule(name="all-serving", match={"namespace": ".*"}, cls="inference")])
    mapped = rhythm_page_data(pool_store, cfg, step_s=60, wmap=wmap)
    assert _batch_gpu_hours(default) > 0
    assert _batch_gpu_hours(mapped) == 0
