"""The hostile inputs of the newer doors (tests/fixtures/hostile/<door>/, issue 43): Datadog query
JSON, Telegraf line protocol, column mappings, request logs, CSV. Each case is refused naming the
file and the line (or JSON path, or the mapping's key), or loaded with a note that says what was
dropped; never a traceback; every message bounded and free of raw control characters; the store
as it was after a refusal. Each goes through ``python -m analytics ingest`` (a real DuckDB file)
and through the Data page's upload (``pages._store.load_upload``); the mappings through
``load_mapping``, which both the CLI's ``--columns`` and the Data page's saved mapping use.

The cases too big to commit (``make_doors.big_cases``) are built here at their smallest, under
lowered limits; ``bench/hostile.py`` runs them at full size.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.access import LOCAL_OPERATOR
from analytics.errors import MESSAGE_MAX_CHARS, ConfigError
from analytics.ingest import ingest_path
from analytics.store import TIME_WINDOW_ENV, Store

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
DOORS = ("datadog", "lineprotocol", "mapping", "requests", "csv")
T = 1_780_000_000_000
GOOD = b'# TYPE up gauge\nup{job="good"} 1 1780000000000\nup{job="good"} 1 1780000060000\n'
SERIES = "series[1]"

# door/name -> ("refused", line | JSON path | mapping key | None, words) or ("loaded", None, words in the note)
EXPECT: dict[str, tuple[str, int | str | None, str]] = {
    "datadog/time_1e300.json": ("refused", f"{SERIES}.pointlist[0][0]", "far outside any plausible time"),
    "datadog/time_2_pow_70.json": ("refused", f"{SERIES}.pointlist[0][0]", "far outside any plausible time"),
    "datadog/scope_number.json": ("refused", f"{SERIES}.scope", "'scope' is a number"),
    "datadog/pointlist_object.json": ("refused", f"{SERIES}.pointlist", "must be a list of [milliseconds, value]"),
    "datadog/metric_list.json": ("refused", f"{SERIES}.metric", "metric name is a list"),
    "datadog/metric_empty.json": ("refused", f"{SERIES}.metric", "metric name is empty"),
    "datadog/value_object.json": ("refused", f"{SERIES}.pointlist[0][1]", "is not a number"),
    "datadog/tag_set_object.json": ("refused", f"{SERIES}.tag_set", "must be a list"),
    "datadog/duplicate_key.json": ("refused", "series[0]", "key 'metric' given twice"),
    "datadog/duplicate_tag.json": ("refused", f"{SERIES}.scope", "tag 'gpu' given twice"),
    "datadog/value_1e400.json": ("refused", 15, "number is infinity"),
    "datadog/nan_literal.json": ("refused", 15, "not valid JSON"),
    "datadog/deep_nesting.json": ("refused", None, "nested too deep for its keys to be checked"),
    "datadog/escape_in_metric.json": ("refused", f"{SERIES}.metric", "metric name is a list"),
    "lineprotocol/bad_utf8.lp": ("refused", 3, "not UTF-8"),
    "lineprotocol/int_overflow.lp": ("refused", 3, "'1.5e10000i' is not an integer"),
    "lineprotocol/int_beyond_64bit.lp": ("refused", 3, "does not fit a 64-bit integer"),
    "lineprotocol/duplicate_tag.lp": ("refused", 3, "tag 'host' given twice"),
    "lineprotocol/duplicate_field.lp": ("refused", 3, "field 'utilization_gpu' given twice"),
    "lineprotocol/ts_beyond_int64.lp": ("refused", 3, "beyond any representable time"),
    "lineprotocol/nan_inf_fields.lp": ("loaded", None, "3 NaN/Inf field value(s) dropped, first at line 3"),
    "lineprotocol/escape_in_tag.lp": ("refused", 3, "is not key=value"),
    "requests/latency_huge.csv": ("refused", 3, "not a plausible latency in ms: more than 86,400 s"),
    "requests/latency_inf.csv": ("refused", 3, "not a plausible latency"),
    "requests/latency_nan.csv": ("loaded", None, "1 NaN latency value(s) read as missing (the request counts, "
                                                 "its latency does not), first at line 3"),
    "requests/service_empty.csv": ("refused", 3, "is not a service name"),
    "requests/request_id_twice.csv": ("loaded", None, "1 row(s) repeating a 'request_id' seen earlier in the log "
                                                      "skipped, first at line 22"),
    "requests/overlap_first.csv": ("loaded", None, "20 requests"),
    "requests/overlap_second.csv": ("loaded", None, "19 row(s) already in the store"),
    "csv/metric_empty.csv": ("refused", 3, "empty metric name"),
    "csv/no_layout_1000_columns.csv": ("refused", 1, "no known layout"),
    "csv/escape_in_header.csv": ("refused", 2, "is not a number"),
}
# loaded first in the same store (the case is about what is already there)
BEFORE = {"requests/overlap_second.csv": "requests/overlap_first.csv"}
# mapping file -> the key its message names, and words of what to write instead
MAPPINGS: dict[str, tuple[str, str]] = {
    "labels_list.toml": ("[labels] pod", "is a list"),
    "metric_integer.toml": ("[metric] name", "is an integer"),
    "metric_empty.toml": ("[metric] name", "is empty; write name = "),
    "zone_unknown.toml": ("[time] zone", "is no time zone; write an IANA name"),
    "malformed.toml": ("not valid TOML", "line 4"),
    "scale_inf.toml": ("[signals.duty] scale", "write a finite, non-zero number"),
    "scale_nan.toml": ("[signals.duty] scale", "write a finite, non-zero number"),
    "scale_string.toml": ("[signals.duty] scale", "is a string"),
    "time_column_list.toml": ("[time] column", "is a list"),
    "unknown_table.toml": ("'valuez'", "its tables: [time]"),
    "values_integers.toml": ("[values] columns", "a string or a list of strings"),
    "requests_empty_service.toml": ("[requests] service_name", "is empty"),
}
SMALL_LIMITS = {"TIDELENS_MAX_LINE_BYTES": str(1 << 20), "TIDELENS_MAX_SERIES_PER_SOURCE": "5000",
                "TIDELENS_MAX_ARCHIVE_MEMBERS": "1000"}
# the built cases (make_doors.big_cases at scale 0) -> place, words
BIG = {"one_huge_line.lp": (2, "a line longer than 1,048,576 bytes"),
       "three_million_columns.csv": (1, "a header of 20,000 columns, more than 10,000"),
       "many_series.json": ("series", "10,000 series"),
       "request_log_long_line.csv": (3, "a line longer than 1,048,576 bytes"),
       "one_line_many_fields.lp": (1, "20,000 fields in one line, more than 10,000"),
       "sparse_1GiB.tar.gz": ("!zeros.prom", "counted in the bytes they unpack to"),
       "many_members.zip": (None, "more than 1,000 entries (files, folders and links) in one archive: refused "
                                  "before any member is read")}


@pytest.fixture(autouse=True)
def default_window(monkeypatch):
    monkeypatch.delenv(TIME_WINDOW_ENV, raising=False)  # the default window, as a user gets it


def _doors():
    spec = importlib.util.spec_from_file_location("make_doors", HOSTILE / "make_doors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _state(store: Store) -> tuple:
    t = store.totals()
    loaded = store.sources().filter(store.sources()["status"] == "loaded").height
    return t["samples"], t["series"], loaded, store.query("SELECT count(*) AS n FROM requests")["n"][0]


def _placed(message: str, name: str, place: int | str | None) -> bool:
    if isinstance(place, int):
        return re.search(rf"{re.escape(name)}:{place}(:| at )", message) is not None
    if isinstance(place, str) and place.startswith("!"):  # an archive's member
        return f"{name}{place}:" in message
    if isinstance(place, str):
        return f"{name} at {place}:" in message
    return name in message


def _clean(message: str) -> None:
    assert len(message) <= MESSAGE_MAX_CHARS + 600, len(message)  # the message and its file name
    assert "Traceback" not in message and "internal error" not in message, message
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", message), repr(message)


def test_every_door_file_has_an_expectation_and_matches_its_generator() -> None:
    on_disk = {f"{p.parent.name}/{p.name}" for door in DOORS for p in (HOSTILE / door).iterdir()}
    expected = set(EXPECT) | {f"mapping/{n}" for n in MAPPINGS} | {"mapping/table.csv"}
    assert on_disk == expected, on_disk ^ expected
    for name, data in _doors().cases().items():
        assert (HOSTILE / name).read_bytes() == data, f"{name}: run tests/fixtures/hostile/make_doors.py"


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_each_case_through_the_upload_is_refused_with_its_place_or_noted(tmp_path, case) -> None:
    from pages._store import load_upload

    kind, place, words = EXPECT[case]
    target = tmp_path / "up.duckdb"
    load_upload(target, "good.prom", GOOD, None, who=LOCAL_OPERATOR)
    if case in BEFORE:
        load_upload(target, Path(BEFORE[case]).name, (HOSTILE / BEFORE[case]).read_bytes(), None, who=LOCAL_OPERATOR)
    with Store(target, read_only=True) as store:
        before = _state(store)
    name = Path(case).name
    out = load_upload(target, name, (HOSTILE / case).read_bytes(), None, who=LOCAL_OPERATOR)
    _clean(out.message)
    with Store(target, read_only=True) as store:
        after = _state(store)
    if kind == "refused":
        assert out.status == "failed" and words in out.message, out
        assert _placed(out.message, name, place), out.message
        assert after == before  # nothing of it was kept
    else:
        assert out.status == "loaded" and words in out.message, out
        again = load_upload(target, name, (HOSTILE / case).read_bytes(), None, who=LOCAL_OPERATOR)
        with Store(target, read_only=True) as store:
            assert again.status == "skipped" and _state(store) == after  # reloading changes nothing


def test_overlapping_request_logs_count_each_request_once(tmp_path) -> None:
    """The second log repeats 19 of the first's 20 rows and adds one: 21 requests, not 39; the
    same rows under a third name add nothing."""
    with Store(tmp_path / "r.duckdb") as store:
        for name in ("overlap_first.csv", "overlap_second.csv"):
            [r] = ingest_path(store, HOSTILE / "requests" / name)
            assert r.status == "loaded", r
        assert _state(store)[3] == 21
        head, *rows = (HOSTILE / "requests" / "overlap_first.csv").read_bytes().splitlines(keepends=True)
        copy = tmp_path / "reordered.csv"  # the same rows in another order: another file, the same requests
        copy.write_bytes(head + b"".join(reversed(rows)))
        [r] = ingest_path(store, copy)
        assert "20 row(s) already in the store" in (r.note or ""), r
        assert _state(store)[3] == 21


def _cli(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**{k: v for k, v in os.environ.items() if k != TIME_WINDOW_ENV}, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "analytics", "ingest", "--db", str(db), *args],
                          capture_output=True, text=True, env=full, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("door", ("datadog", "lineprotocol", "requests", "csv"))
def test_each_door_through_the_cli(tmp_path, door) -> None:
    """One ``ingest`` per door over a copy of its cases (sorted, so an overlap follows its first log):
    each refused case named with its place on stderr, the loaded ones in the table, no traceback,
    and the store holding the good file and the loaded cases only."""
    db = tmp_path / "c.duckdb"
    good = tmp_path / "good.prom"
    good.write_bytes(GOOD)
    assert _cli(db, str(good)).returncode == 0
    folder = tmp_path / door
    folder.mkdir()
    cases = sorted(c for c in EXPECT if c.startswith(door + "/"))
    for case in cases:
        (folder / Path(case).name).write_bytes((HOSTILE / case).read_bytes())
    proc = _cli(db, str(folder))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    for line in out.splitlines():
        _clean(line)
    for case in cases:
        kind, place, words = EXPECT[case]
        path = str(folder / Path(case).name)
        if kind == "refused":
            line = next((ln for ln in proc.stderr.splitlines() if ln.startswith(f"tidelens: {path}")), "")
            assert words in line and _placed(line, path, place), (case, proc.stderr)
        else:
            assert re.search(rf"^loaded .*{re.escape(path)}", proc.stdout, re.M), (case, proc.stdout)
    with Store(db, read_only=True) as store:
        names = set(store.sources().filter(store.sources()["status"] == "loaded")["name"].to_list())
    assert names == {str(good)} | {str(folder / Path(c).name) for c in cases if EXPECT[c][0] == "loaded"}


@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_each_mapping_is_refused_naming_file_and_key(tmp_path, name) -> None:
    """``load_mapping`` (the CLI's --columns, the Data page's saved mapping) refuses it; the CLI
    says so before opening the store."""
    from analytics.ingest.mapping import load_mapping

    key, words = MAPPINGS[name]
    path = HOSTILE / "mapping" / name
    with pytest.raises(ConfigError) as err:
        load_mapping(path)
    message = str(err.value)
    _clean(message)
    assert message.startswith(f"{path}: ") and key in message and words in message, message


def test_the_cli_refuses_a_bad_mapping_before_the_store_changes(tmp_path) -> None:
    db = tmp_path / "m.duckdb"
    good = tmp_path / "good.prom"
    good.write_bytes(GOOD)
    _cli(db, str(good))
    with Store(db, read_only=True) as store:
        before = _state(store)
    for name in ("labels_list.toml", "scale_inf.toml", "malformed.toml"):
        proc = _cli(db, "--columns", str(HOSTILE / "mapping" / name), str(HOSTILE / "mapping" / "table.csv"))
        assert proc.returncode == 2 and f"{HOSTILE / 'mapping' / name}: " in proc.stderr, proc.stderr
        _clean(proc.stderr)
    with Store(db, read_only=True) as store:
        assert _state(store) == before


def test_the_big_cases_are_refused_at_their_limit(tmp_path, monkeypatch) -> None:
    """A line past the line limit (line protocol, request log), a header past the column limit, a
    response past the series limit: through the CLI and the upload, each refused with its place."""
    from pages._store import load_upload

    built = _doors().big_cases(tmp_path, scale=0)
    for k, v in SMALL_LIMITS.items():
        monkeypatch.setenv(k, v)
    db = tmp_path / "b.duckdb"
    proc = _cli(db, *map(str, built.values()), env=SMALL_LIMITS)  # one process: each case its own line
    assert proc.returncode == 1, proc.stderr
    said = {p: [ln for ln in proc.stderr.splitlines() if ln.startswith(f"tidelens: {p}")] for p in built.values()}
    for path in built.values():
        place, words = BIG[path.name]
        [line] = said[path]
        _clean(line)
        assert words in line and _placed(line, str(path), place), line
        out = load_upload(tmp_path / "up.duckdb", path.name, path.read_bytes(), None, who=LOCAL_OPERATOR)
        _clean(out.message)
        assert out.status == "failed" and words in out.message and _placed(out.message, path.name, place), out
    with Store(db, read_only=True) as store:
        assert _state(store)[:3] == (0, 0, 0)
