"""A sub-range's timelines cut from the whole range's equal the ones built for it: on the
morning pool (a time-sliced node and MIG GPUs among plain ones) and the mixed one."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from analytics.sample import sim
from analytics.sample.export import load_into  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.timeline import TimelineConfig, slice_timelines, timelines  # noqa: E402

HOUR_MS = 3_600_000


def _store(tmp_path_factory: pytest.TempPathFactory, scenario: str):
    db = tmp_path_factory.mktemp(f"slice_{scenario}") / f"{scenario}.duckdb"
    with Store(db) as s:
        load_into(s, sim.simulate(scenario, days=2, gpus=16, seed=5))
    return db


@pytest.fixture(scope="module", params=["morning", "mixed"])
def pool_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    with Store(_store(tmp_path_factory, request.param), read_only=True) as s:
        yield s


@pytest.mark.parametrize("step_s", [60, 300, 3600])
def test_a_cut_equals_the_sub_range_built_again(pool_store: Store, step_s: int) -> None:
    first, last = pool_store.totals()["first_ts_ms"], pool_store.totals()["last_ts_ms"]
    whole = timelines(pool_store, TimelineConfig(step_s=step_s))
    # Unaligned ends, inside the data (the 09:00 ramp of the first day), and open on one side.
    # The first ten minutes: no two pods share a time-sliced GPU yet (whether it is time-sliced
    # is decided over the whole store, not over the range viewed).
    for start, end in ((first + 7 * HOUR_MS + 17_000, first + 15 * HOUR_MS + 41_000),
                       (first + 30 * HOUR_MS + 1, None), (None, last - 20 * HOUR_MS - 59_999),
                       (first, first + 10 * 60_000)):
        built = timelines(pool_store, TimelineConfig(step_s=step_s, start_ms=start, end_ms=end))
        cut = slice_timelines(whole, step_s, start, end)
        for name in ("pool", "holdings", "services"):
            assert getattr(built, name).height > 0
            assert_frame_equal(getattr(cut, name), getattr(built, name), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        assert cut.facts is whole.facts

