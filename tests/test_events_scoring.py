"""The tolerance-banded scoring rule (:func:`truth_scoring.score_banded`) on hand-made cases.

One service, SLO 120 ms, buckets 100 / 150 / 200 ms: the band is (100, 150], so a minute at
300 ms is clearly above, 130 or 110 ms ambiguous, 50 ms clearly below. Truth events cover the
steps with ``ts`` in ``[start, end)``, found events those in ``(start, end]`` (both conventions
of the code under test), so ``_true(a, b)`` and ``_found(a, b)`` both mean steps ``a .. b-1``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analytics.events.event import Event
from truth_scoring import (ABOVE, AMBIGUOUS, BELOW, could_be_events, minute_labels, score,
                                      score_banded, slo_band)
from analytics.times import iso_utc as iso

T0 = 1_790_000_040_000
STEP = 60_000
N = 120
SVC = "recommender"
BOUNDS = {SVC: [100.0, 150.0, 200.0]}
CLEAR, AMBIG, LOW = 300.0, 110.0, 50.0


def _p99(*spans: tuple[int, int, float]) -> pl.DataFrame:
    p = np.full(N, LOW)
    for a, b, v in spans:
        p[a:b] = v
    return pl.DataFrame({"ts_ms": T0 + np.arange(N, dtype=np.int64) * STEP, "service": [SVC] * N, "p99_ms": p})


def _true(a: int, b: int, cause: str = "batch_contention", mis: bool = False) -> dict:
    return {"service": SVC, "start": iso(T0 + a * STEP), "end": iso(T0 + b * STEP), "cause": cause,
            "misattributable_by_dashboard": mis}


def _found(a: int, b: int, cause: str = "batch_contention", mis: bool = False) -> Event:
    return Event(id=f"ev-{a}", service=SVC, pool="p", start_ms=T0 + (a - 1) * STEP, end_ms=T0 + (b - 1) * STEP,
                 peak_p99_ms=CLEAR, slo_ms=120.0, cause=cause, misattributed=mis,
                 evidence={"naive_reading": {"cause": "traffic_surge"}})


def _truth(*events: dict) -> dict:
    return {"slos": {SVC: {"p99_ms": 120.0}}, "scrape_s": 60,
            "event_rule": {"min_minutes": 5, "merge_gap_minutes": 10}, "events": list(events)}


def _banded(truth: dict, found: list[Event], p99: pl.DataFrame):
    return score_banded(truth, found, truth_p99=p99, bucket_bounds_ms=BOUNDS)


def test_band_is_the_buckets_next_to_the_slo():
    assert slo_band([100, 150, 200], 120) == (100.0, 150.0)
    assert slo_band([500, 750, 1000, 2500], 1000) == (750.0, 2500.0)
    assert slo_band([], 120) == (120.0, 120.0)
    labels = minute_labels(np.array([50.0, 100.0, 100.5, 150.0, 150.5, np.nan]), (100.0, 150.0))
    assert labels.tolist() == [BELOW, BELOW, AMBIGUOUS, AMBIGUOUS, ABOVE, BELOW]


def test_clear_miss_is_a_miss_even_beside_ambiguous_minutes():
    p99 = _p99((10, 20, CLEAR), (40, 60, AMBIG))
    sc = _banded(_truth(_true(10, 20)), [_found(40, 60)], p99)
    assert (sc.n_true, sc.matched) == (1, 0)
    assert sc.detection_f1 == 0.0


def test_found_event_in_clearly_below_minutes_is_a_false_positive():
    sc = _banded(_truth(), [_found(50, 60)], _p99())
    assert (sc.n_found, sc.within_tolerance) == (1, 0)
    assert sc.detection_f1 == 0.0
    # One ambiguous minute inside does not excuse twenty clearly-below ones.
    sc = _banded(_truth(), [_found(50, 70)], _p99((60, 61, AMBIG)))
    assert sc.within_tolerance == 0 and sc.detection_f1 == 0.0


def test_found_event_over_ambiguous_minutes_only_is_excused():
    sc = _banded(_truth(), [_found(50, 60)], _p99((50, 60, AMBIG)))
    assert (sc.n_found, sc.within_tolerance, sc.n_true) == (1, 1, 0)
    assert sc.detection_f1 == 1.0


def test_true_event_split_by_ambiguous_minutes_matched_by_one_found_event_counts_once():
    p99 = _p99((10, 20, CLEAR), (20, 32, AMBIG), (32, 42, CLEAR))
    truth, found = _truth(_true(10, 20), _true(32, 42)), [_found(10, 42)]
    sc = _banded(truth, found, p99)
    assert (sc.n_true, sc.n_found, sc.matched) == (1, 1, 1)
    assert sc.detection_f1 == 1.0 and sc.cause_accuracy == 1.0
    # Strict one-to-one scoring of the same case counts a miss.
    strict = score(truth, found)
    assert strict.matched == 1 and strict.detection_f1_strict < 1.0


def test_found_events_bridged_across_ambiguous_minutes_count_once():
    p99 = _p99((10, 20, CLEAR), (20, 32, AMBIG), (32, 42, CLEAR))
    sc = _banded(_truth(_true(10, 42)), [_found(10, 20), _found(32, 42)], p99)
    assert (sc.n_true, sc.n_found, sc.matched, sc.within_tolerance) == (1, 1, 1, 0)
    assert sc.detection_f1 == 1.0


def test_merging_never_hides_an_uncovered_clearly_above_piece():
    p99 = _p99((10, 20, CLEAR), (20, 32, AMBIG), (32, 42, CLEAR))
    sc = _banded(_truth(_true(10, 20), _true(32, 42)), [_found(10, 20)], p99)
    assert (sc.n_true, sc.matched) == (1, 0)
    assert sc.detection_f1 == 0.0


def test_bridge_across_a_long_clearly_below_gap_does_not_merge():
    p99 = _p99((10, 20, CLEAR), (20, 22, AMBIG), (22, 40, LOW), (40, 50, CLEAR))
    sc = _banded(_truth(_true(10, 20), _true(40, 50)), [_found(10, 50)], p99)
    assert (sc.n_true, sc.matched) == (2, 1)
    assert sc.detection_f1 < 1.0


def test_event_of_ambiguous_minutes_only_is_optional_but_its_cause_is_scored():
    p99 = _p99((10, 20, 130.0))
    missed = _banded(_truth(_true(10, 20)), [], p99)
    assert (missed.n_true, missed.n_optional, missed.detection_f1) == (0, 1, 1.0)
    found = _banded(_truth(_true(10, 20, cause="traffic_surge")), [_found(10, 20, cause="batch_contention")], p99)
    assert (found.matched, found.within_tolerance, found.detection_f1) == (0, 1, 1.0)
    assert found.attributed == 1 and found.cause_accuracy == 0.0


def test_misattribution_and_naive_reading_on_hits():
    p99 = _p99((10, 20, CLEAR), (60, 70, CLEAR))
    truth = _truth(_true(10, 20, mis=True), _true(60, 70, cause="traffic_surge"))
    sc = _banded(truth, [_found(10, 20, mis=True), _found(60, 70, cause="traffic_surge")], p99)
    assert (sc.matched, sc.mis_true, sc.mis_found, sc.mis_both) == (2, 1, 1, 1)
    assert sc.misattribution_f1 == 1.0 and sc.cause_accuracy == 1.0
    assert sc.naive_cause_accuracy == pytest.approx(0.5)
    assert sc.confusion == {"batch_contention->batch_contention": 1, "traffic_surge->traffic_surge": 1}


def test_could_be_events_follow_the_truths_event_rule():
    labels = minute_labels(_p99((10, 13, AMBIG), (20, 24, CLEAR), (50, 52, AMBIG))["p99_ms"].to_numpy(),
                           (100.0, 150.0))
    assert could_be_events(labels, min_len=5, merge_gap=10) == [(10, 24)]


def test_found_pieces_either_side_do_not_cover_a_clearly_above_piece_between_them():
    p99 = _p99((10, 20, CLEAR), (20, 24, AMBIG), (24, 34, CLEAR), (34, 38, AMBIG), (38, 48, CLEAR))
    truth = _truth(_true(10, 20), _true(24, 34), _true(38, 48))
    sc = _banded(truth, [_found(10, 20), _found(38, 48)], p99)
    assert sc.matched == 0 and sc.n_true == 1
    assert sc.detection_f1 == 0.0
