"""A request log's success column in words (issue 44, deliverable 3): SUCCEED / FAILED and the
other usual words, any case, and HTTP status codes; a mapping's ``success_values``; a value that
reads as neither, and a log whose every request reads as failed, said in the note."""

from __future__ import annotations

import pytest

from analytics.errors import ConfigError
from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import load_mapping, mapping_toml
from analytics.store import Store

T = 1_767_571_200_000
MAPPING = """
[time]
column = "ts"
unit = "ms"
[requests]
latency = "took"
latency_unit = "s"
service_name = "imagegen"
success = "predict_status"
"""


def _log(values: list[str]) -> bytes:
    rows = [f"{T + 1000 * i},{1.5 + i},{v}" for i, v in enumerate(values)]
    return ("ts,took,predict_status\n" + "\n".join(rows) + "\n").encode()


def _mapping(tmp_path, extra: str = ""):
    p = tmp_path / "m.toml"
    p.write_text(MAPPING + extra)
    return load_mapping(p)


def _errors(store) -> list[bool]:
    return [r[0] for r in store.query("SELECT error FROM requests ORDER BY ts_ms").rows()]


def test_success_words_and_http_codes_read_right_in_any_case(store, tmp_path) -> None:
    values = ["SUCCEED", "FAILED", "success", "Failure", "OK", "ERROR", "true", "FALSE", "1", "0", "200", "503"]
    r = ingest_bytes(store, "pred.csv", _log(values), columns=_mapping(tmp_path))
    assert r.status == "loaded", r
    assert _errors(store) == [False, True] * 6
    assert "every request reads as failed" not in r.note and "neither" not in r.note


def test_a_log_where_every_request_reads_failed_says_so(store, tmp_path) -> None:
    r = ingest_bytes(store, "pred.csv", _log(["FAILED", "FAILED", "ERROR"]), columns=_mapping(tmp_path))
    assert r.status == "loaded" and "every request reads as failed (by 'predict_status')" in r.note, r.note
    assert "success_values" in r.note


def test_a_value_read_as_neither_counts_failed_and_is_named(store, tmp_path) -> None:
    r = ingest_bytes(store, "pred.csv", _log(["SUCCEED", "PENDING", "PENDING"]), columns=_mapping(tmp_path))
    assert _errors(store) == [False, True, True]
    assert "2 request(s) whose 'predict_status' reads neither as success nor as failure ('PENDING')" in r.note


def test_a_mapping_names_the_success_values_and_round_trips(store, tmp_path) -> None:
    m = _mapping(tmp_path, 'success_values = ["GOOD", "fine"]\n')
    r = ingest_bytes(store, "pred.csv", _log(["good", "FINE", "SUCCEED", "bad"]), columns=m)
    assert r.status == "loaded" and _errors(store) == [False, False, True, True]
    (tmp_path / "again.toml").write_text(mapping_toml(m))
    assert load_mapping(tmp_path / "again.toml") == m
    assert m.digest() != _mapping(tmp_path).digest()  # another reading: another load


def test_success_values_without_a_success_column_or_of_the_wrong_kind_are_refused(tmp_path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(MAPPING.replace('success = "predict_status"', 'success_values = ["OK"]'))
    with pytest.raises(ConfigError, match="success_values needs success"):
        load_mapping(p)
    p = tmp_path / "bad2.toml"
    p.write_text(MAPPING + "success_values = 3\n")
    with pytest.raises(ConfigError, match=r"\[requests\] success_values is an integer"):
        load_mapping(p)


def test_a_status_column_in_words_counts_failed_requests(store) -> None:
    data = (f"timestamp,latency_ms,status\n{T},10,SUCCEED\n{T + 1000},20,FAILED\n{T + 2000},30,200\n"
            f"{T + 3000},40,500\n").encode()
    assert ingest_bytes(store, "gw.csv", data).status == "loaded"
    assert _errors(store) == [False, True, False, True]


def test_an_empty_success_cell_counts_failed_and_is_named(store, tmp_path) -> None:
    """Issue 50, 7: an empty cell read as a success (the docs: failed, and named in the note)."""
    r = ingest_bytes(store, "pred.csv", _log(["SUCCEED", "", "FAILED", ""]), columns=_mapping(tmp_path))
    assert _errors(store) == [False, True, True, True]
    assert "2 request(s) whose 'predict_status' reads neither as success nor as failure (an empty cell)" in r.note
    again = ingest_bytes(store, "copy.csv", _log(["SUCCEED", "", "FAILED", "", "OK"]), columns=_mapping(tmp_path))
    assert "4 row(s) already in the store" in again.note and "neither" not in again.note, again.note  # (said "0")
    # with the success values named, an empty cell is no success either
    with Store(":memory:") as named:
        r = ingest_bytes(named, "pred.csv", _log(["GOOD", ""]), columns=_mapping(tmp_path, 'success_values = ["GOOD"]\n'))
        assert _errors(named) == [False, True] and "(an empty cell)" in r.note, r.note
