"""The inputs of the newest doors, bounded (issue 50): typed times, GPU counts, steps, days, hours
and minutes, SLOs, intervals, a ``tidelens.toml`` nested too deep, an audit record whose sources
column is garbage. Each is refused with the flag (or file) named and what to give, or shown as
unreadable; never a traceback; with ``--json`` the refusal is an ``{"error": ...}`` object on
standard output and the exit is non-zero; a refused ``change add`` leaves the store as it was.

Every case runs through ``analytics.cli.main`` (the ``tidelens`` entry point) on empty or tiny
stores: nothing here builds timelines but the one page test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analytics.access import LOCAL_OPERATOR
from analytics.audit import record
from analytics.change.record import list_changes
from analytics.cli import main
from analytics.config import read_config
from analytics.errors import ConfigError
from analytics.events import EventsConfig
from analytics.slo import SloTable, slos_from_config
from analytics.store import Store
from analytics.view import parse_query_params, parse_slo
from apptest_helpers import isolate, open_store_page

SLO_RULE = "an SLO is a positive, finite number of milliseconds, at most 86,400,000 (a day)"
DEEP = {
    "arrays": "a = " + "[" * 50_000 + "]" * 50_000,
    "inline tables": "a = " + "{b = " * 50_000 + "}" * 50_000,
    "dotted key": "x." + ".".join(["a"] * 50_000) + " = 1",
    "table header": "[" + ".".join(["a"] * 50_000) + "]\nx = 1",
    "just over": "a = " + "[" * 33 + "]" * 33,
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, standard output and standard error of one ``tidelens`` command."""
    try:
        rc = main(list(argv))
    except SystemExit as stop:  # argparse's own refusal
        rc = int(stop.code or 0)
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    return rc, got.out, got.err


def _error(out: str) -> str:
    """The ``--json`` refusal's message (stdout is exactly one JSON object with one key)."""
    doc = json.loads(out)
    assert list(doc) == ["error"], doc
    return doc["error"]


@pytest.fixture
def empty_db(tmp_path: Path) -> str:
    db = str(tmp_path / "empty.duckdb")
    Store(db).close()
    return db


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_a_tidelens_toml_nested_too_deep_is_refused_naming_the_file(tmp_path, capsys, shape) -> None:
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text(DEEP[shape], encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{cfg}: nested more than 32 levels deep"):
        read_config(cfg)
    rc, out, err = _run(capsys, "classify", "--db", ":memory:", "--config", str(cfg), "--json")
    assert rc == 2 and _error(out).startswith(f"{cfg}: nested more than 32 levels deep"), err
    cfg.write_text("a = " + "[" * 31 + "]" * 31, encoding="utf-8")  # as deep as allowed: read
    assert "a" in read_config(cfg)


def test_a_column_mapping_is_read_by_the_one_toml_rule(tmp_path, capsys) -> None:
    """``--columns``' mapping (and the Data page's saved one, the same ``load_mapping``) is bounded
    as ``tidelens.toml`` is: over 1 MiB refused before it is read, nested too deep refused, each
    naming the file; the store is never opened."""
    table = tmp_path / "table.csv"
    table.write_text("timestamp,duty\n1780000000,45\n", encoding="utf-8")
    good = '[time]\ncolumn = "timestamp"\nunit = "s"\n[metric]\nname = "duty"\n[values]\ncolumns = ["duty"]\n'
    cases = {"big.columns.toml": (good + "# " + "x" * (1 << 20) + "\n", "bytes; a column mapping is at most 1,048,576"),
             "deep.columns.toml": (good + DEEP["arrays"].replace("a = ", "[labels]\nx = ", 1),
                                   "nested more than 32 levels deep")}
    db = tmp_path / "never.duckdb"
    for name, (text, words) in cases.items():
        mapping = tmp_path / name
        mapping.write_text(text, encoding="utf-8")
        rc, out, err = _run(capsys, "ingest", "--db", str(db), "--columns", str(mapping), str(table), "--json")
        assert rc == 2 and _error(out).startswith(f"{mapping}: ") and words in _error(out), (out, err)
    assert not db.exists()


def test_the_page_says_a_too_deep_tidelens_toml_by_name(tmp_path, monkeypatch) -> None:
    """The Overview over a store, its tidelens.toml nested 50,000 levels: the page's message
    names the file (it was a RecursionError)."""
    isolate(monkeypatch, tmp_path)
    (tmp_path / "tidelens.toml").write_text(DEEP["arrays"], encoding="utf-8")
    db = tmp_path / "one.duckdb"
    with Store(db) as st:
        st.con.execute("SELECT 1").fetchall()
    fixture = Path(__file__).parent / "fixtures" / "datadog_dcgm_t4_scrape.prom"
    assert main(["ingest", "--db", str(db), str(fixture), "--at", "2026-10-05T00:00Z"]) == 0
    at = open_store_page("pages/overview.py", db)
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(str(e.value) for e in (*at.error, *at.warning))
    assert "tidelens.toml" in said and "nested more than 32 levels deep" in said, said


def test_audit_rows_with_garbage_in_their_sources_show_as_unreadable(tmp_path, capsys) -> None:
    db = tmp_path / "a.duckdb"
    garbage = ["{oops", "[1, 2]", '[{"name": 1}]', "[" * 5000 + "]" * 5000, "\x1b[31mred"]
    with Store(db) as st:
        record(st, LOCAL_OPERATOR, "load", "loaded", "good.prom",
               sources=[{"name": "good.prom", "hash": "abc123", "status": "loaded"}], at_ms=1_000)
        for i, raw in enumerate(garbage, start=2):
            record(st, LOCAL_OPERATOR, "load", "loaded", f"bad{i}.prom", at_ms=i * 1_000)
            # what someone editing the store's file could leave: no writer of Tidelens writes it
            st.con.execute("UPDATE audit SET sources = $raw WHERE what = $what", {"raw": raw, "what": f"bad{i}.prom"})
    rc, out, _ = _run(capsys, "audit", "--db", str(db), "--json")
    rows = {r["what"]: r for r in json.loads(out)}
    assert rc == 0 and rows["good.prom"]["sources"] == [{"name": "good.prom", "hash": "abc123", "status": "loaded"}]
    assert "unreadable" not in rows["good.prom"]
    for i in range(2, 2 + len(garbage)):
        bad = rows[f"bad{i}.prom"]
        assert bad["sources"] == [] and bad["unreadable"].startswith("sources unreadable"), bad
        assert len(bad["unreadable"]) < 300 and "\x1b" not in out
    rc, out, _ = _run(capsys, "audit", "--db", str(db))
    assert rc == 0 and out.count("sources unreadable") == len(garbage) and "good.prom (loaded, abc123)" in out


@pytest.mark.parametrize("value", ["nan", "-5", "1e309", "0", "inf", "86400001", "abc"])
def test_every_slo_flag_is_refused_by_the_one_rule(capsys, tmp_path, value) -> None:
    """``--slo-ms`` on every command that takes it, and ``--slo``, refused alike (the same message
    as the library's rule, which the page's input and [slo] read too)."""
    db = str(tmp_path / "none.duckdb")
    for argv in (["events", "--db", db], ["review", "--db", db, "--out", str(tmp_path / "r.md")],
                 ["change", "compare", "--db", db, "--at", "2026-10-08"], ["whatif", "--preset", "morning-ramp"]):
        rc, out, err = _run(capsys, *argv, "--slo-ms", value, "--json")
        assert rc == 2 and "--slo-ms" in _error(out), (argv, out, err)
        assert (SLO_RULE if value != "abc" else "write a number of milliseconds") in _error(out)
    rc, out, _ = _run(capsys, "events", "--db", db, "--slo", f"chat={value}", "--json")
    assert rc == 2 and "--slo chat=" in _error(out)
    if value != "abc":
        assert SLO_RULE in _error(out)
        with pytest.raises(ValueError, match=re.escape(SLO_RULE)):
            parse_slo(f"chat:{value}")  # the sidebar's per-service field and a link's ?slo=
        assert "slo" not in parse_query_params({"slo": value})[0].to_query_params()
        with pytest.raises(ConfigError, match=re.escape(SLO_RULE)):
            SloTable.from_ms({"*": float(value)})


def test_slo_in_tidelens_toml_meets_the_same_rule(tmp_path) -> None:
    cfg = tmp_path / "tidelens.toml"
    for bad in ("nan", "inf", "-1", "0", '"fast"', "1e12"):
        cfg.write_text(f"[slo]\nchat = {bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=f"{cfg}: \\[slo\\] chat = .*{SLO_RULE[:20]}"):
            slos_from_config(cfg)


def test_a_service_given_twice_is_refused(capsys, empty_db) -> None:
    for argv in (["events", "--db", empty_db], ["change", "compare", "--db", empty_db, "--at", "2026-10-08"]):
        rc, out, _ = _run(capsys, *argv, "--slo", "chat=1000", "--slo", "chat=5", "--json")
        assert rc == 2 and "--slo chat: given twice" in _error(out)
    with pytest.raises(ValueError, match="chat is given twice"):
        parse_slo("chat:1000,chat:5")


@pytest.mark.parametrize(("flags", "words"), [
    (["--at", "now+9999999999999999999999d"], "--at 'now+9999999999999999999999d': no time between the years 1 and 9999"),
    (["--at", "now-" + "9" * 400 + "w"], "no time between the years 1 and 9999"),
    (["--at", "2026-10-08", "--reservation-gpus", "100000000000000000000"], "--reservation-gpus 1e+20: give 0 to 100000 GPUs"),
    (["--at", "2026-10-08", "--release-hour", "nan"], "--release-hour nan: give 0 to 23.99 h"),
    (["--at", "2026-10-08", "--tidal-window", "21:75-07:00"], "--tidal-window '21:75-07:00': write START-END"),
    (["--at", "2026-10-08", "--tidal-window", "22:99-3"], "(minutes 00 to 59)"),
])
def test_change_add_refuses_what_no_pool_has_and_writes_nothing(capsys, empty_db, flags, words) -> None:
    policy = "tidal" if "--tidal-window" in flags else "polite" if "--release-hour" in flags else "partitioned"
    rc, out, err = _run(capsys, "change", "add", "--db", empty_db, "--policy", policy, *flags, "--json")
    assert rc == 2 and words in _error(out), err
    with Store(empty_db, read_only=True) as st:
        assert list_changes(st) == []


@pytest.mark.parametrize(("argv", "words"), [
    (["change", "candidates", "DB", "--step", "0"], "--step '0' must be a whole number of seconds from 1s to 1d"),
    (["change", "compare", "DB", "--at", "2026-10-08", "--step", "99999999999999d"], "--step '99999999999999d'"),
    (["change", "compare", "DB", "--at", "2026-10-08", "--before-days", "nan"], "--before-days nan: give 0.5 to 90 days"),
    (["change", "compare", "DB", "--at", "2026-10-08", "--after-days", "inf"], "--after-days inf: give 0.5 to 90 days"),
    (["events", "DB", "--min-duration-min", "nan"], "min_duration_min=nan: give a finite number of minutes"),
    (["events", "DB", "--from", "now+9999999999999999999999d"], "--from 'now+9999999999999999999999d': no time"),
])
def test_steps_days_and_times_are_bounded(capsys, empty_db, argv, words) -> None:
    argv = [x if x != "DB" else f"--db={empty_db}" for x in argv]
    rc, out, err = _run(capsys, *argv, "--json")
    assert rc == 2 and words in _error(out), (out, err)


def test_export_rules_json_is_json_and_its_interval_bounded(capsys) -> None:
    rc, out, _ = _run(capsys, "export", "rules", "--out", "-", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["file"] == "-" and doc["rules"]["groups"][0]["interval"] == "60s"
    assert len(doc["rules"]["groups"][0]["rules"]) > 40
    for interval in ("99999999999999d", "0", "1e400", "2d"):
        rc, out, _ = _run(capsys, "export", "rules", "--out", "-", "--interval", interval, "--json")
        assert rc == 2 and f"--interval {interval!r} " in _error(out)


def test_argparse_refusals_are_json_too(capsys) -> None:
    rc, out, err = _run(capsys, "change", "add", "--db", ":memory:", "--at", "now", "--policy", "partitioned",
                        "--reservation-gpus", "1e20", "--json")
    assert rc == 2 and "argument --reservation-gpus: invalid int value: '1e20'" in _error(out)
    assert "usage:" in err
    rc, out, err = _run(capsys, "change", "add", "--db", ":memory:", "--at", "now", "--policy", "partitioned",
                        "--reservation-gpus", "1e20")
    assert rc == 2 and out == "" and "invalid int value" in err  # without --json: the usual line
