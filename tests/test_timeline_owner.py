"""The timelines have one owner: ``analytics.timeline.store_timelines`` builds them (and the store's
facts) once per store file, range, step and map for the CLI's events, the review, the calibration
and the backtest; after that pass no analysis reads the store again for its notes or GPU model."""

from __future__ import annotations

from pathlib import Path

import pytest

import analytics.timeline.cache as owner
from analytics.events import EventsConfig
from analytics.events.pipeline import analyse_store, analyse_timelines
from analytics.timeline import store_timelines
from analytics.review import review_store
from analytics.store import Store
from analytics.whatif.calibrate import calibrate, calibrate_store, calibrate_timelines, gpu_model_of
from analytics.slo import SloTable

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def db(morning_db: Path) -> Path:
    return morning_db  # the session's one build of this store (tests/conftest.py), read only


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, empty_results: Path) -> list[tuple]:
    """Every timeline build the owner makes, with its range; the owner's cache starts empty (of
    every store's results: the run's fits, keyed by their steps, stay)."""
    made: list[tuple] = []
    real = owner.timelines

    def counted(store, cfg, wmap=None, **kw):
        made.append((cfg.step_s, cfg.start_ms, cfg.end_ms))
        return real(store, cfg, wmap, **kw)

    monkeypatch.setattr(owner, "timelines", counted)
    return made


def test_events_review_calibration_and_backtest_share_one_build(db: Path, builds: list[tuple]) -> None:
    with Store(db, read_only=True) as st:
        events = analyse_store(st, EventsConfig(), slos=SloTable.every(150.0, "the test"))
        cal = calibrate_store(st, slos=SloTable.every(150.0, "the test"))
        scn = calibrate(st, slos=SloTable.every(150.0, "the test"))
        review = review_store(st)
    assert builds == [(60, None, None)]  # one device pass for all four
    assert events.events and cal.backtest["observed_violation_minutes"] >= 0
    assert scn.provenance["pool.gpu_model"] == cal.scenario.provenance["pool.gpu_model"]
    assert review.events is not None and review.calibration is not None


def test_after_the_pass_nothing_reads_the_store(db: Path, builds: list[tuple],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from analytics.sql import store as sq
    from analytics.sql.whatif import GPU_MODELS

    with Store(db, read_only=True) as st:
        tl = store_timelines(st, EventsConfig().timeline_config())
        expected_model = gpu_model_of(st)
        asked: list[str] = []
        real_query = Store.query

        def watched(self, sql, params=None):
            asked.append(sql)
            return real_query(self, sql, params)

        monkeypatch.setattr(Store, "query", watched)
        again = analyse_store(st, EventsConfig(), slos=SloTable.every(150.0, "the test"))
        cal = calibrate_store(st, slos=SloTable.every(150.0, "the test"))
    # The cache key reads the sources table; the notes, the histogram's bounds, the request logs
    # and the GPU model come from the pass's facts, not from queries after it.
    assert sq.SOURCE_NOTES_WITH not in asked and GPU_MODELS not in asked
    assert all("_bucket" not in q for q in asked), asked
    assert builds == [(60, None, None)]
    # ...and say what the store says
    assert expected_model is not None and cal.scenario.provenance["pool.gpu_model"] == expected_model[1]
    assert calibrate_timelines(tl, slos=SloTable.every(150.0, "the test")).scenario.provenance == cal.scenario.provenance
    assert analyse_timelines(tl, EventsConfig(), slos=SloTable.every(150.0, "the test")).notes == again.notes
