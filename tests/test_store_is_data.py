"""A store is data, never code (issue 43): Tidelens opens a DuckDB file only when its catalog holds
what Tidelens writes, and every connection runs with external access off and locked.

Each hostile store is built here, in a real DuckDB file, by the test's own connection (Tidelens
never connects but through analytics.store_file): a ``sources`` view over
``read_text('/proc/self/environ')``, one over ``/etc/passwd``, one over an http URL, a macro, a
foreign table, a Tidelens store with a column added. Each is refused with its path and why
through the Python API, the CLI (a subprocess whose environment holds a canary that must never
be printed) and the app's store opener; files that are no DuckDB store (empty, text, a named
pipe, a folder) are refused at once.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import duckdb
import pytest

from analytics.errors import StoreFileError
from analytics.store import Store

ROOT = Path(__file__).resolve().parent.parent
CANARY_ENV = "TIDELENS_TEST_CANARY_SECRET"
URL = "http://127.0.0.1:9/secret"
SCRAPE = (b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
          b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1"} 50 1700000000000\n')


def _raw(path: Path) -> duckdb.DuckDBPyConnection:
    """The test's own connection for building hostile files (no extension is fetched)."""
    return duckdb.connect(str(path), config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A store Tidelens wrote (one loaded scrape), checkpointed: copied by every case that needs one."""
    from analytics.ingest import ingest_bytes

    path = tmp_path_factory.mktemp("made") / "made.duckdb"
    with Store(path) as st:
        assert ingest_bytes(st, "scrape.prom", SCRAPE).status == "loaded"
        st.con.execute("CHECKPOINT")
    assert not Path(f"{path}.wal").exists()
    return path


def _tidelens_store(path: Path, made: Path) -> Path:
    shutil.copyfile(made, path)
    return path


def _environ_view(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE VIEW sources AS SELECT 1 AS id, content AS name FROM read_text('/proc/self/environ')")


def _passwd_view(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE VIEW series AS SELECT content AS metric FROM read_text('/etc/passwd')")


def _http_view(con: duckdb.DuckDBPyConnection) -> None:
    # DuckDB binds a view when it is created, and binding an http URL needs httpfs (the network):
    # the view is bound over a local file through a variable that no later session has, so
    # wherever it is read it reads the URL.
    con.execute("SET VARIABLE u = '/etc/hostname'")
    con.execute(f"CREATE VIEW sources AS SELECT content AS name FROM read_text(coalesce(getvariable('u'), '{URL}'))")


def _macro(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE MACRO metric_name(x) AS x")


def _table_macro(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE MACRO grab(p) AS TABLE SELECT * FROM read_text(p)")


def _extra_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE notes (body VARCHAR)")


def _column_added(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("ALTER TABLE sources ADD COLUMN owner VARCHAR")


def _column_retyped(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("ALTER TABLE sources ALTER COLUMN note TYPE INTEGER")


def _schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SCHEMA other; CREATE TABLE other.sources (name VARCHAR)")


def _index(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE INDEX by_time ON samples (ts_ms)")


def _enum(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TYPE mood AS ENUM ('a', 'b')")


# name -> (built on a Tidelens store?, builder, what the refusal says)
HOSTILE: dict[str, tuple[bool, Callable[[duckdb.DuckDBPyConnection], None], str]] = {
    "environ_view": (False, _environ_view, "it holds a view named 'sources'"),
    "passwd_view": (False, _passwd_view, "it holds a view named 'series'"),
    "http_view": (False, _http_view, "it holds a view named 'sources'"),
    "macro": (True, _macro, "it holds a macro named 'metric_name'"),
    "table_macro": (True, _table_macro, "it holds a table macro named 'grab'"),
    "extra_table": (True, _extra_table, "it holds a table named 'notes'"),
    "column_added": (True, _column_added, "table named 'sources' unlike Tidelens' own (column 'owner' is not"),
    "column_retyped": (True, _column_retyped, "(column 'note' is INTEGER, not VARCHAR)"),
    "other_schema": (True, _schema, "a table named 'sources' in schema 'other'"),
    "index": (True, _index, "it holds a index named 'by_time'"),
    "enum_type": (True, _enum, "it holds a type named 'mood'"),
}


def _hostile(tmp_path: Path, case: str, made: Path) -> Path:
    on_store, build, _ = HOSTILE[case]
    path = tmp_path / f"{case}.duckdb"
    if on_store:
        _tidelens_store(path, made)
    con = _raw(path)
    try:
        build(con)
    finally:
        con.close()
    return path


def _catalog(path: Path) -> list[tuple]:
    con = _raw(path)
    try:
        return con.execute("SELECT type, name, sql FROM (SELECT 'v' AS type, view_name AS name, sql "
                           "FROM duckdb_views() WHERE NOT internal UNION ALL SELECT 't', table_name, sql "
                           "FROM duckdb_tables()) ORDER BY ALL").fetchall()
    finally:
        con.close()


def _cli(*args: str, timeout: float = 120) -> tuple[int, str, str, str]:
    """``tidelens ARGS`` in a subprocess with a canary secret in its environment."""
    canary = f"canary-{secrets.token_hex(8)}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), CANARY_ENV: canary}
    proc = subprocess.run([sys.executable, "-m", "analytics.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr, canary


def test_the_http_view_would_read_its_url(tmp_path, made):
    """The http case is what it claims: read without Tidelens' opener, it asks for the network."""
    con = _raw(_hostile(tmp_path, "http_view", made))
    try:
        with pytest.raises(duckdb.Error, match="httpfs"):
            con.execute("SELECT * FROM sources").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_store_is_refused_with_its_path_and_why(tmp_path, made, case, read_only):
    path = _hostile(tmp_path, case, made)
    before = _catalog(path)
    with pytest.raises(StoreFileError) as err:
        Store(path, read_only=read_only)
    message = str(err.value)
    assert message.startswith(f"{path}: not a Tidelens store: ")
    assert HOSTILE[case][2] in message
    assert "open only stores Tidelens wrote" in message
    assert _catalog(path) == before  # refused before the schema was written into it


def test_a_refusal_is_one_bounded_line_whatever_the_catalog_holds(tmp_path):
    path = tmp_path / "many.duckdb"
    con = _raw(path)
    con.execute('CREATE VIEW "evil\x1b[2J\u202e" AS SELECT 1 AS x')
    for i in range(30):
        con.execute(f"CREATE VIEW v{i:03d}_{'x' * 200} AS SELECT {i} AS x")
    con.close()
    with pytest.raises(StoreFileError) as err:
        Store(path, read_only=True)
    message = str(err.value)
    assert "it holds a view named 'evil\\u001b[2J\\u202e'" in message
    assert "and 28 more objects" in message
    assert len(message) < 1000 and "\n" not in message and "\x1b" not in message


@pytest.mark.parametrize(("command", "case"), [("sources", "environ_view"), ("series", "passwd_view"),
                                               ("sources", "http_view"), ("series", "column_added")])
def test_the_cli_refuses_a_hostile_store_and_prints_nothing_of_the_server(tmp_path, made, command, case):
    path = _hostile(tmp_path, case, made)
    rc, out, err, canary = _cli(command, "--db", str(path))
    assert rc == 2, (out, err)
    assert "Traceback" not in err
    assert f"tidelens: {path}: not a Tidelens store: " in err
    assert HOSTILE[case][2] in err
    for text in (out, err):
        assert canary not in text and CANARY_ENV not in text
        assert "root:" not in text  # /etc/passwd's first line


def test_the_cli_json_listing_refuses_too(tmp_path, made):
    rc, out, err, canary = _cli("sources", "--db", str(_hostile(tmp_path, "environ_view", made)), "--json")
    assert rc == 2 and "Traceback" not in err and canary not in err + out
    assert "not a Tidelens store" in json.loads(out)["error"]  # --json refusals are JSON on stdout


def test_the_apps_store_opener_and_upload_refuse_a_hostile_store(tmp_path, made, monkeypatch):
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_upload, open_store

    canary = f"canary-{secrets.token_hex(8)}"
    monkeypatch.setenv(CANARY_ENV, canary)
    path = _hostile(tmp_path, "environ_view", made)
    with pytest.raises(StoreFileError, match="it holds a view named 'sources'"):
        with open_store(path):
            pass
    outcome = load_upload(path, "scrape.prom", SCRAPE, None, who=LOCAL_OPERATOR)
    assert outcome.status == "failed"
    assert outcome.message.startswith(f"{path}: not a Tidelens store: it holds a view named 'sources'")
    assert canary not in outcome.message


def test_the_app_says_a_hostile_store_is_refused_and_shows_nothing_of_the_server(tmp_path, made, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from apptest_helpers import APP, isolate, shown

    isolate(monkeypatch, tmp_path)
    canary = f"canary-{secrets.token_hex(8)}"
    monkeypatch.setenv(CANARY_ENV, canary)
    path = _hostile(tmp_path, "environ_view", made)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(path)})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warnings = [shown(w.value) for w in at.warning]
    assert any("not a Tidelens store: it holds a view named 'sources'" in w for w in warnings), warnings
    drawn = " ".join(str(getattr(e, "value", "")) for e in at.main) + " ".join(
        str(getattr(e, "value", "")) for e in at.sidebar)
    assert canary not in drawn


def test_a_genuine_store_opens_and_reads(tmp_path, made):
    path = _tidelens_store(tmp_path / "mine.duckdb", made)
    with Store(path, read_only=True) as st:
        assert st.totals()["samples"] == 1
        assert st.sources()["name"].to_list() == ["scrape.prom"]
    with Store(path) as st:  # a writer again: the schema's CREATE IF NOT EXISTS changes nothing
        assert st.totals()["samples"] == 1
    rc, out, err, _ = _cli("sources", "--db", str(path), "--json")
    assert rc == 0, err
    assert [s["name"] for s in json.loads(out)] == ["scrape.prom"]


def test_a_store_from_before_a_table_existed_still_opens(tmp_path, made):
    """Stores older than the requests and slos tables lack them: missing is not foreign."""
    path = _tidelens_store(tmp_path / "old.duckdb", made)
    con = _raw(path)
    con.execute("DROP TABLE requests; DROP TABLE slos")
    con.close()
    with Store(path, read_only=True) as st:
        assert st.totals()["samples"] == 1 and not st.has_requests()


def test_a_store_with_a_live_pull_state_opens(tmp_path, made):
    from analytics.sql.live import LIVE_STATE_CREATE

    path = _tidelens_store(tmp_path / "pulled.duckdb", made)
    con = _raw(path)
    con.execute(LIVE_STATE_CREATE)
    con.close()
    with Store(path, read_only=True) as st:
        assert st.totals()["sources"] == 1


@pytest.mark.parametrize("path_kind", ["file", "memory"])
@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/proc/self/environ')",
    "SELECT * FROM glob('/etc/*')",
    f"SELECT * FROM read_text('{URL}')",
    "ATTACH '{tmp}/never.duckdb' AS other",
    "COPY (SELECT 1) TO '{tmp}/never.csv'",
    "INSTALL httpfs",
    "LOAD httpfs",
])
def test_no_query_on_a_store_connection_reaches_a_file_or_the_network(tmp_path, made, path_kind, sql):
    path = _tidelens_store(tmp_path / "mine.duckdb", made) if path_kind == "file" else ":memory:"
    with Store(path, read_only=path_kind == "file") as st:
        with pytest.raises(duckdb.PermissionException):
            st.con.execute(sql.format(tmp=tmp_path)).fetchall()
    assert not list(tmp_path.glob("never*"))


@pytest.mark.parametrize("sql", ["SET enable_external_access = true", "SET lock_configuration = false",
                                 "SET allowed_directories = ['/']", "RESET enable_external_access"])
def test_external_access_cannot_be_turned_back_on(sql):
    with Store(":memory:") as st:
        with pytest.raises(duckdb.Error, match="locked|Cannot change"):
            st.con.execute(sql)
        assert st.con.execute("SELECT current_setting('enable_external_access')").fetchall() == [(False,)]


def _not_a_store(tmp_path: Path, kind: str, made: Path) -> tuple[Path, str]:
    path = tmp_path / f"{kind}.duckdb"
    if kind == "empty":
        path.touch()
        return path, "the file is empty, not a DuckDB store"
    if kind == "text":
        path.write_text("name,value\nup,1\n" * 10)
        return path, "not a DuckDB file"
    if kind == "short":
        path.write_bytes(b"DUCK")
        return path, "not a DuckDB file"
    if kind == "pipe":
        os.mkfifo(path)
        return path, "the store is a named pipe, not a DuckDB store file"
    if kind == "folder":
        path.mkdir()
        return path, "the store is a folder, not a DuckDB store file"
    if kind == "pipe_wal":
        _tidelens_store(path, made)
        os.mkfifo(f"{path}.wal")
        return path, f"its write-ahead log {path}.wal is a named pipe"
    raise AssertionError(kind)


NOT_A_STORE = ["empty", "text", "short", "pipe", "folder", "pipe_wal"]


@pytest.mark.parametrize("kind", NOT_A_STORE)
def test_a_file_that_is_no_store_is_refused_at_once_by_the_api(tmp_path, made, kind):
    path, why = _not_a_store(tmp_path, kind, made)
    before = path.read_bytes() if path.is_file() else None
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            Store(path).close()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    opener = threading.Thread(target=open_it, daemon=True)  # a pipe that hangs fails, not hangs, the test
    opener.start()
    opener.join(timeout=60)
    assert outcome, "opening hung"
    assert isinstance(outcome[0], StoreFileError), outcome
    assert str(outcome[0]).startswith(f"{path}: {why}")
    if before is not None:
        assert path.read_bytes() == before  # nothing written into it


@pytest.mark.parametrize("kind", ["empty", "text", "pipe", "pipe_wal"])
def test_the_cli_refuses_a_db_that_is_no_store_without_a_traceback(tmp_path, made, kind):
    path, why = _not_a_store(tmp_path, kind, made)
    rc, out, err, _ = _cli("sources", "--db", str(path), timeout=60)  # a hang fails the test
    assert rc == 2, (out, err)
    assert err.startswith(f"tidelens: {path}: {why}") and "Traceback" not in err


def test_a_read_only_command_on_a_missing_store_says_so(tmp_path):
    path = tmp_path / "none.duckdb"
    with pytest.raises(StoreFileError, match="no such store"):
        Store(path, read_only=True)
    assert not path.exists()


HOSTILE_NAME = "evil\x1b[2J\x1b]0;owned\x07\u202egpj.\x9b31m.prom"


def test_ingest_and_sources_show_control_characters_in_names_as_escapes(tmp_path):
    source = tmp_path / HOSTILE_NAME
    source.write_bytes(SCRAPE)
    db = tmp_path / "names.duckdb"
    rc, out, err, _ = _cli("ingest", "--db", str(db), str(source))
    assert rc == 0, err
    rc_t, table, err_t, _ = _cli("sources", "--db", str(db))
    rc_j, listing, err_j, _ = _cli("sources", "--db", str(db), "--json")
    assert rc_t == rc_j == 0, (err_t, err_j)
    for text in (out, err, table, err_t, listing, err_j):
        assert not {"\x1b", "\x07", "\u202e", "\x9b"} & set(text), repr(text)
    assert "evil\\u001b[2J\\u001b]0;owned\\u0007\\u202egpj.\\u009b31m.prom" in out
    assert json.loads(listing)[0]["name"] == str(source)  # JSON escapes: the same name to a reader


def test_a_db_path_with_control_characters_is_shown_escaped_in_the_error(tmp_path):
    path = tmp_path / "x\x1b[31m.duckdb"
    path.write_text("not duckdb")
    rc, out, err, _ = _cli("sources", "--db", str(path))
    assert rc == 2 and "\x1b" not in err and "x\\u001b[31m.duckdb: not a DuckDB file" in err
