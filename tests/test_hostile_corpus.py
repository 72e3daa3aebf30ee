"""The hostile-input corpus (tests/fixtures/hostile/): each file refused naming file and line, or
loaded with the report saying what it did not keep; never a traceback, the store as it was.

Every file in the folder must have an expectation here, so a case added to the corpus cannot go
untested; the files must equal what ``make_corpus.py`` writes, so the corpus stays reproducible.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.ingest import ingest_path
from analytics.store import TIME_WINDOW_ENV, Store

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
GOOD = b'# TYPE up gauge\nup{job="good"} 1 1780000000000\nup{job="good"} 1 1780000060000\n'

# name -> ("refused", line | JSON path | None, words in the message) or ("loaded", None, words in the note)
EXPECT: dict[str, tuple[str, int | str | None, str]] = {
    "escape_q.prom": ("refused", 3, "invalid escape sequence '\\q'"),
    "nul_label.prom": ("refused", 3, "NUL byte"),
    "fractional_ts.prom": ("refused", 3, "is a fraction"),
    "year_10000.prom": ("refused", 3, "year 10000"),
    "ts_1970.prom": ("refused", 3, "plausible window"),
    "negative_ts.prom": ("refused", 3, "plausible window"),
    "overflow_ts.prom": ("refused", 3, "beyond any representable time"),
    "seconds_as_ms.prom": ("refused", 3, "seconds where milliseconds were expected"),
    "bad_utf8.prom": ("refused", 3, "not UTF-8"),
    "duplicate_label.prom": ("refused", 3, "duplicate label name 'job'"),
    "html_metric_name.prom": ("refused", 3, "invalid metric name"),
    "untimestamped_twice.prom": ("refused", 3, "again without a timestamp"),
    "negative_counter.prom": ("loaded", None, "1 negative counter value(s) dropped (a counter, a "
                                              "histogram's bucket or count never goes below 0), first at line 3"),
    "nan_counter.prom": ("loaded", None, "2 NaN/Inf counter value(s) dropped (counters, buckets and counts), first at line 3"),
    "stray_eof_0.0.4.prom": ("loaded", None, "text 0.0.4"),
    "after_eof.om": ("loaded", None, "1 line(s) after the # EOF at line 3"),
    "csv_short_row.csv": ("refused", 3, "3 field(s) where the header has 4"),
    "csv_missing_value.csv": ("refused", 3, "no value on this row"),
    "csv_missing_time.csv": ("refused", 3, "no timestamp on this row"),
    "csv_extra_column.csv": ("refused", 3, "4 field(s) where the header has 3"),
    "csv_mixed_units.csv": ("refused", 3, "seconds where milliseconds were expected"),
    "csv_huge_time.csv": ("refused", 3, "far outside any plausible time"),
    "json_bad_deep.json": ("refused", "data.result[6].values[150]", "not a number"),
    "json_ms_as_seconds.json": ("refused", "data.result[0].values[1]", "milliseconds"),
    "json_truncated.json": ("refused", 1, "invalid JSON"),
    "zeros_bomb.prom.gz": ("refused", None, "decompression bomb"),
    "not_gzip.prom.gz": ("refused", None, "corrupt or truncated gzip data"),
    "png_as_metrics.prom": ("refused", 1, "unrecognised format"),
    "empty.prom": ("refused", None, "empty"),
}


@pytest.fixture(autouse=True)
def default_window(monkeypatch):
    monkeypatch.delenv(TIME_WINDOW_ENV, raising=False)  # the default window, as a user gets it


def _corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", HOSTILE / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.cases()


def test_every_corpus_file_has_an_expectation_and_matches_its_generator() -> None:
    # the newer doors' cases live in folders of their own (tests/test_hostile_doors.py)
    on_disk = {p.name for p in HOSTILE.iterdir() if p.is_file() and p.name not in ("make_corpus.py", "make_doors.py")}
    assert on_disk == set(EXPECT), on_disk ^ set(EXPECT)
    for name, data in _corpus().items():
        assert (HOSTILE / name).read_bytes() == data, f"{name}: run tests/fixtures/hostile/make_corpus.py"


def _state(store: Store) -> tuple:
    t = store.totals()
    return t["samples"], t["series"], store.sources().filter(store.sources()["status"] == "loaded").height


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_each_case_is_refused_with_its_place_or_reported(tmp_path, name) -> None:
    kind, place, words = EXPECT[name]
    good = tmp_path / "good.prom"
    good.write_bytes(GOOD)
    with Store(tmp_path / "t.duckdb") as store:
        ingest_path(store, good)
        before = _state(store)
        path = HOSTILE / name
        [res] = ingest_path(store, path)
        if kind == "refused":
            assert res.status == "failed", res
            assert str(path) in res.error and words in res.error, res.error
            if isinstance(place, int):
                assert re.search(rf"{re.escape(str(path))}:{place}(:| at )", res.error), res.error
            elif isinstance(place, str):
                assert f" at {place}:" in res.error, res.error
            assert "internal error" not in res.error and "Traceback" not in res.error
            assert _state(store) == before  # nothing of it was kept
        else:
            assert res.status == "loaded", res
            assert res.note and words in res.note, res.note
        # Re-loading the same file changes nothing.
        again = _state(store)
        ingest_path(store, path)
        assert _state(store) == again


@pytest.mark.slow
def test_the_cli_over_the_whole_corpus_gives_messages_and_a_usable_store(tmp_path) -> None:
    """One ``tidelens ingest`` of the folder: exit 1 (some refused), no traceback, every refused
    file named with its line, bounded memory; the store then serves every reader."""
    db = str(tmp_path / "c.duckdb")
    env = {k: v for k, v in os.environ.items() if k != TIME_WINDOW_ENV}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in EXPECT:  # (a copy: the doors' folders are tests/test_hostile_doors.py's)
        (corpus / name).write_bytes((HOSTILE / name).read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "analytics.cli", "ingest", "--db", db, str(corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    guard = threading.Timer(300, proc.kill)  # a hang guard, not a benchmark
    guard.start()
    try:
        out = proc.stdout.read()  # type: ignore[union-attr]
        # This process's own peak (RUSAGE_CHILDREN would be the worst child this worker ever ran).
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        guard.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 1, out
    assert "Traceback" not in out and "internal error" not in out, out
    for name, (kind, place, _) in EXPECT.items():
        if kind == "refused" and isinstance(place, int):
            assert re.search(rf"{re.escape(str(corpus / name))}:{place}(:| at )", out), name
    assert usage.ru_maxrss / 1024 < 1024, f"the corpus took {usage.ru_maxrss / 1024:.0f} MiB"
    for cmd in (["sources"], ["events"], ["timeline"], ["rhythm"]):
        r = subprocess.run([sys.executable, "-m", "analytics.cli", *cmd, "--db", db],
                           capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in r.stderr, (cmd, r.stderr)
        assert r.returncode in (0, 2), (cmd, r.returncode, r.stderr)  # 2: "not enough data", said so


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_each_case_through_the_app_upload_gives_the_same_verdict(tmp_path, name) -> None:
    """The Data page's upload (bytes, not a path) reaches the same verdict and message."""
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_upload

    kind, place, words = EXPECT[name]
    target = tmp_path / "up.duckdb"
    load_upload(target, "good.prom", GOOD, None, who=LOCAL_OPERATOR)
    with Store(target, read_only=True) as store:
        before = _state(store)
    out = load_upload(target, name, (HOSTILE / name).read_bytes(), None, who=LOCAL_OPERATOR)
    if kind == "refused":
        assert out.status == "failed" and words in out.message, out
        assert "internal error" not in out.message
        if isinstance(place, int):
            assert re.search(rf"^{re.escape(name)}:{place}(:| at )", out.message), out.message
    else:
        assert out.status == "loaded" and words in out.message, out
    with Store(target, read_only=True) as store:
        after = _state(store)
    assert after == before if kind == "refused" else after[0] > before[0]
