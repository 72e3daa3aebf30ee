"""The OpenMetrics project's own parser suite (tests/fixtures/openmetrics, 211 cases), through the
loader the CLI uses: what should parse loads exactly what prometheus_client reads; what should not
is refused with its file, line and reason, or loaded with a note that names the defect."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import orjson
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from analytics.ingest import ingest_path
from analytics.ingest.om_check import HISTOGRAM_DEFECT
from analytics.signals import canonical_metric
from analytics.store import TIME_WINDOW_ENV, Store

SUITE = Path(__file__).parent / "fixtures" / "openmetrics" / "parsers"
CASES = sorted(p.name for p in SUITE.iterdir() if (p / "test.json").exists())
GOOD = [c for c in CASES if json.loads((SUITE / c / "test.json").read_text())["shouldParse"]]
BAD = [c for c in CASES if c not in GOOD]
AT_MS = 1_700_000_000_000
INT64_MAX = 2 ** 63 - 1
# What a load note says when it names a defect (om_check's, or the parser's own drops and EOF notes).
DEFECT = re.compile(r"not valid OpenMetrics|" + HISTOGRAM_DEFECT + r"|dropped|after the # EOF")


@pytest.fixture(autouse=True)
def suite_window(monkeypatch):
    # The suite writes times from 1970 on: the plausible-time window is a stated policy
    # (TIDELENS_TIME_WINDOW), widened here as a user would for such files.
    monkeypatch.setenv(TIME_WINDOW_ENV, "1970-01-01,9999-12-31")


def test_the_vendored_suite_is_whole() -> None:
    assert (len(CASES), len(GOOD), len(BAD)) == (211, 44, 167)


def _ms(ts) -> int | None:
    if ts is None:
        return None
    if hasattr(ts, "sec"):  # prometheus_client's Timestamp(sec, nsec)
        return ts.sec * 1000 + round(ts.nsec / 1e6)
    return round(ts * 1000)


def _expected(text: str) -> tuple[dict, int]:
    """prometheus_client's samples as the store keys them (series, ms) -> value, the last in a
    millisecond winning; and how many it read that epoch milliseconds cannot hold."""
    out, beyond = {}, 0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            ts = _ms(s.timestamp)
            if ts is not None and abs(ts) > INT64_MAX:
                beyond += 1
                continue
            key = (canonical_metric(s.name), tuple(sorted(s.labels.items())), AT_MS if ts is None else ts)
            out[key] = s.value
    return out, beyond


def _loaded(store: Store) -> dict:
    rows = store.query("SELECT s.metric, s.labels, x.ts_ms, x.value FROM samples x JOIN series s "
                       "ON s.id = x.series_id").rows()
    return {(m, tuple(sorted(orjson.loads(lab).items())), ts): v for m, lab, ts, v in rows}


def _differing(a: dict, b: dict) -> set:
    assert a.keys() == b.keys()
    return {k for k in a if not ((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k])}


@pytest.mark.parametrize("case", GOOD)
def test_a_case_that_should_parse_loads_what_prometheus_client_reads(case: str) -> None:
    path = SUITE / case / "metrics"
    expected, beyond = _expected(path.read_text())
    with Store(":memory:") as store:
        [result] = ingest_path(store, path, at_ms=AT_MS)
        assert result.status == "loaded", result.error
        # A series given twice at one time (duplicate_timestamps_*): prometheus_client keeps the
        # first, Tidelens the last, as for every load (docs/conventions.md), and counts each.
        assert len(_differing(_loaded(store), expected)) <= result.duplicates
        note = result.note or ""
        assert "not valid" not in note and HISTOGRAM_DEFECT not in note and "after the # EOF" not in note
        if beyond:  # '12345678901234567890.1234567890': valid, beyond int64 ms; said, not hidden
            assert f"{beyond} sample(s) dropped whose timestamp is valid OpenMetrics but beyond" in note


@pytest.mark.parametrize("case", BAD)
def test_a_case_that_should_not_parse_is_refused_with_its_line_or_loaded_with_a_note(case: str) -> None:
    path = SUITE / case / "metrics"
    with Store(":memory:") as store:
        [result] = ingest_path(store, path, at_ms=AT_MS)
        if result.status == "failed":
            assert "internal error" not in result.error
            # the file, the line and why; an empty file has no line to name
            assert re.match(re.escape(str(path)) + r":\d+: \S", result.error) or \
                result.error == f"{path}: the file is empty", result.error
            assert store.totals()["samples"] == 0
        else:
            assert result.status == "loaded"
            assert DEFECT.search(result.note or ""), result.note


def test_a_histogram_that_is_not_one_reaches_the_pages_that_show_percentiles() -> None:
    from analytics.timeline import timelines

    with Store(":memory:") as store:
        ingest_path(store, SUITE / "simple_histogram" / "metrics", at_ms=AT_MS)
        assert timelines(store).facts.histogram_defects == ()
        path = SUITE / "bad_histograms_9" / "metrics"  # buckets decrease
        [result] = ingest_path(store, path, at_ms=AT_MS)
        assert result.status == "loaded" and HISTOGRAM_DEFECT in result.note
        [note] = timelines(store).facts.histogram_defects  # what Tail events adds to its notes
        assert note.startswith(f"{path}: {HISTOGRAM_DEFECT}") and "Buckets out of order" in note


def test_escapes_follow_the_grammar_any_escaped_character_stands_for_itself() -> None:
    with Store(":memory:") as store:
        ingest_path(store, SUITE / "escaping" / "metrics", at_ms=AT_MS)
        values = sorted(orjson.loads(lab)["foo"] for lab in store.series("a_total")["labels"])
    assert values == ['b"a\nr', 'b"a\nr # ', "b\\a\\z", "b\\a\\z # "]
