"""The shell as the app: with no ``--db`` a command opens what the app opens (the bundled sample,
said on standard error); a store, file or flag that is not there is said before any work and
leaves no file behind; an unknown flag names the nearest; tables print numbers formatted and
headers whole; a long command says its stage on a terminal, and nothing more when piped or
with ``--json``.

The bundled sample here is a small real store put where the sample's cache keeps it (the real
one takes minutes to build); ``data/tidelens.duckdb`` is pointed at a path that is not there.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import polars as pl
import pytest

from analytics import sample
from analytics.cli import common, main
from test_app_pages import build_store


class Terminal(io.StringIO):
    """Standard error as a terminal shows it (``isatty``), its text kept."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An hour of a 4-GPU node (the app tests' store): cheap, and a real DuckDB file."""
    return build_store(tmp_path_factory.mktemp("shell") / "hour.duckdb")


@pytest.fixture
def no_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_store: Path) -> Path:
    """No ``data/tidelens.duckdb``; the bundled sample's cached file is ``small_store``'s copy."""
    monkeypatch.setattr(common, "DEFAULT_DB", tmp_path / "data" / "tidelens.duckdb")
    monkeypatch.setattr(sample, "DEFAULT_CACHE_DIR", tmp_path / "cache")
    cached = sample.default_store_path()
    cached.parent.mkdir(parents=True)
    cached.write_bytes(small_store.read_bytes())
    return cached


def test_no_db_reads_the_bundled_sample_and_says_so(no_default_store: Path, capsys) -> None:
    assert main(["sources", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["status"] == "loaded"  # the sample's sources, not an empty store
    assert "reading the bundled sample, as the app does" in err and str(no_default_store) in err
    assert not common.DEFAULT_DB.exists()  # nothing created where the default store would be
    # `whatif` without --db, --preset or --scenario reads it too (it asked for one of them)
    assert main(["whatif", "--json", "--policy", "shared"]) == 2
    out, err = capsys.readouterr()
    assert "reading the bundled sample" in err and "one of the arguments" not in err
    assert "fewer than 60 steps" in json.loads(out)["error"]  # the hour's service, calibrated: too short


@pytest.mark.parametrize("argv", [["sources"], ["series"], ["audit"], ["rhythm", "--json"], ["signals"],
                                  ["classify"], ["timeline", "--kind", "pool"], ["change", "list"],
                                  ["forecast"], ["export", "grafana", "--out", "g"]])
def test_a_store_that_is_not_there_is_refused_and_not_created(argv: list[str], tmp_path: Path, capsys) -> None:
    db = tmp_path / "nope.duckdb"
    assert main([*argv, "--db", str(db)]) == 2
    assert f"--db {db}: no such store" in capsys.readouterr().err
    assert not db.exists()


def test_ingest_of_a_missing_file_leaves_no_store(tmp_path: Path, capsys) -> None:
    db = tmp_path / "new.duckdb"
    assert main(["ingest", "--db", str(db), str(tmp_path / "missing.prom")]) == 1
    assert "missing.prom: no such file or folder" in capsys.readouterr().err
    assert not db.exists()


def test_an_unknown_flag_names_the_nearest(small_store: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["sources", "--bd", str(small_store)])
    assert done.value.code == 2
    assert "unrecognized arguments: --bd" in (err := capsys.readouterr().err) and "(did you mean --db?)" in err
    with pytest.raises(SystemExit):  # with --json, the JSON error says it too
        main(["events", "--db", str(small_store), "--slo-sm", "100", "--json"])
    assert "did you mean --slo-ms?" in json.loads(capsys.readouterr().out)["error"]
    with pytest.raises(SystemExit):
        main(["evnets"])
    assert "(did you mean events?)" in capsys.readouterr().err


def test_report_refuses_an_id_that_is_no_id_before_opening_anything(tmp_path: Path, capsys) -> None:
    """``ev-nope`` is refused at once: the store named is not even looked at."""
    out = tmp_path / "pm.html"
    assert main(["report", "--db", str(tmp_path / "nope.duckdb"), "--event", "ev-nope", "--out", str(out)]) == 2
    assert "--event 'ev-nope' is not an event id" in capsys.readouterr().err and not out.exists()


def test_tables_print_numbers_formatted_and_headers_whole(capsys) -> None:
    frame = pl.DataFrame({"policy": ["shared", "partitioned"], "slo_compliance_minutes": [0.974852, 0.99],
                          "violation_minutes": [87.423, 3.0], "cost": [4371.1479, 12.0], "runs": [1, 20000],
                          "p99_ms": [None, 1.5], **{f"wide_column_{i}": [1.0, 2.0] for i in range(12)}})
    common.print_table(frame)
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "policy" in line)
    assert all(name in header for name in frame.columns)  # no header broken over two lines
    body = "\n".join(lines)
    assert "0.975" in body and "87.4" in body and "4,371" in body and "20,000" in body
    assert "0.974852" not in body and "4371.1479" not in body and "null" not in body


def test_a_long_command_says_its_stage_on_a_terminal_only(no_default_store: Path, monkeypatch, capsys) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["whatif", "--preset", "morning-ramp", "--days", "2", "--policy", "shared"]) == 0
    said = terminal.getvalue()
    assert "\r\x1b[Ktidelens: whatif: replaying the pool policies..." in said
    assert said.endswith("\r\x1b[K")  # erased: the answer follows on a clean line
    table = capsys.readouterr().out
    assert "tidelens:" not in table and "shared" in table
    # --json on a terminal, or standard error piped: not a character more
    terminal.seek(0), terminal.truncate()
    assert main(["whatif", "--preset", "morning-ramp", "--days", "2", "--policy", "shared", "--json"]) == 0
    assert terminal.getvalue() == ""
    json.loads(capsys.readouterr().out)
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    assert main(["whatif", "--preset", "morning-ramp", "--days", "2", "--policy", "shared"]) == 0
    assert piped.getvalue() == ""
