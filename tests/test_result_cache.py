"""The one result cache (analytics.resultcache): a warm CLI command computes nothing (counted as
cache misses, never seconds), the app reads what the CLI computed, a load into the store
invalidates, two processes at once never read a partial file, the folder is bounded, private, and
said in ``tidelens sources``."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from apptest_helpers import isolated_cli

import analytics.resultcache as rc
from analytics.cli import main
from analytics.errors import ConfigError
from analytics.ingest import ingest_bytes
from analytics.store import Store

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow]


def _run(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def _commands(db: Path, tmp: Path) -> list[list[str]]:
    return [["events", "--db", str(db), "--json"], ["whatif", "--db", str(db), "--json"],
            ["rhythm", "--db", str(db), "--json"], ["review", "--db", str(db), "--json"],
            ["review", "--db", str(db), "--out", str(tmp / "review.html")]]


def test_a_warm_cli_command_computes_nothing(morning_db: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command once (the cache as the session left it: other modules may have filled it),
    then again as a new process would (nothing in memory): every result read, none computed, the
    same output; ``report`` of a listed event too."""
    isolated_cli(monkeypatch, tmp_path)
    first = {" ".join(c): _run(c) for c in _commands(morning_db, tmp_path)}
    event = orjson.loads(first[f"events --db {morning_db} --json"])[0]["id"]
    for argv in _commands(morning_db, tmp_path) + [["report", "--db", str(morning_db), "--event", event,
                                                    "--out", str(tmp_path / "pm.html")]]:
        rc.forget_in_memory()
        out = _run(argv)
        assert rc.misses() == 0, (argv, rc.counts())
        # The answer is read without the timelines it was computed from; the review and the
        # pool's what-if read them (from the cache, computing nothing) for the pool's services.
        if argv[0] not in ("review", "whatif"):
            assert "timelines" not in rc.counts(), (argv, rc.counts())
        if "--json" in argv:
            assert out == first[" ".join(argv)]


def test_the_app_reads_what_the_cli_computed(morning_db: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``tidelens events`` and ``whatif`` warm the cache; the Tail events and What-if pages' cached
    calls, a restarted server's (nothing in memory), compute nothing."""
    from analytics.events import EventsConfig
    from analytics.slo import resolve_slos
    from analytics.timeline import TimelineConfig, store_timelines
    from analytics.whatif.observe import pick_service
    import streamlit as st_

    from pages import _caches as caches, _queries
    from pages._store import config_version, file_version

    isolated_cli(monkeypatch, tmp_path)
    _run(["events", "--db", str(morning_db), "--json"])
    _run(["whatif", "--db", str(morning_db), "--json"])
    with Store(morning_db, read_only=True) as st:
        slos = resolve_slos(st)
        service = pick_service(store_timelines(st, TimelineConfig()).services, slos)
    # A restarted server: nothing in the app's memory, nor in the library's.
    st_.cache_resource.clear()
    caches._WHOLE_SPANS.clear()
    rc.forget_in_memory()
    version, map_version = file_version(morning_db), config_version()
    analysis = _queries.cached_events(str(morning_db), version, None, None, 60, map_version, slos,
                                      EventsConfig.min_duration_min, EventsConfig.merge_gap_min, None, None)
    cal = _queries.cached_calibration(str(morning_db), version, None, None, 60, map_version, service, slos)
    assert analysis.events and cal.scenario.steps
    assert rc.misses() == 0, rc.counts()
    assert rc.counts()["events"] == {"disk": 1} and rc.counts()["calibration"] == {"disk": 1}


def test_a_load_into_the_store_invalidates(morning_db: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    isolated_cli(monkeypatch, tmp_path)
    db = tmp_path / "copy.duckdb"
    db.write_bytes(morning_db.read_bytes())
    _run(["events", "--db", str(db), "--json"])
    before = {f.name for f in rc.cache_folder().glob("*.pkl")}
    with Store(db) as st:
        assert ingest_bytes(st, "one.prom", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",Hostname="n9"} '
                                            b'5 1791360000000\n').status == "loaded"
    rc.forget_in_memory()
    _run(["events", "--db", str(db), "--json"])
    assert rc.counts()["timelines"] == {"miss": 1} and rc.counts()["events"] == {"miss": 1}
    after = {f.name for f in rc.cache_folder().glob("*.pkl")}
    gone = before - after
    assert len(gone) == 2 and all("-timelines-" in n or "-events-" in n for n in gone)  # the old results


_RACE = """
import sys
import analytics.resultcache as rc
scope = rc.Scope("a" * 16, "b" * 16)
value = list(range(300_000))
if sys.argv[1] == "write":
    for _ in range(int(sys.argv[2])):
        rc.forget_in_memory()
        rc._write(rc.cache_folder(), scope, sys.argv[3], value)
else:
    seen = 0
    for _ in range(int(sys.argv[2])):
        got = rc._read(rc.cache_folder(), sys.argv[3])
        if got is not None:
            assert got == value, "a partial or mixed file was read"
            seen += 1
        elif seen:
            raise SystemExit("a result once written went missing: a reader saw a half-written file")
    print(seen)
"""


def test_two_processes_at_once_never_read_a_partial_file(tmp_path: Path) -> None:
    """A writer replaces one result again and again while a reader reads it: every read is the
    whole value (a temporary file moved into place), never a torn one or a gap."""
    env = {**os.environ, "TIDELENS_CACHE_DIR": str(tmp_path / "c")}
    key = "a" * 16 + "-" + "b" * 16 + "-race-0"
    subprocess.run([sys.executable, "-c", _RACE, "write", "1", key], env=env, cwd=ROOT, check=True)
    writer = subprocess.Popen([sys.executable, "-c", _RACE, "write", "60", key], env=env, cwd=ROOT)
    reader = subprocess.run([sys.executable, "-c", _RACE, "read", "60", key], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    writer.wait(timeout=120)
    assert reader.returncode == 0 and writer.returncode == 0, reader.stderr
    assert int(reader.stdout) == 60


def test_the_folder_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TIDELENS_CACHE_MB", "1")
    scope = rc.Scope("c" * 16, "d" * 16)
    for n in range(4):  # about 0.4 MiB each
        assert rc.remembered(scope, "big", n, lambda n=n: bytes(400_000) + bytes([n]))[-1] == n
    files = list(tmp_path.glob("*.pkl"))
    assert 1 <= len(files) <= 2 and sum(f.stat().st_size for f in files) <= 1 << 20
    rc.forget_in_memory()
    assert rc.remembered(scope, "big", 3, lambda: pytest.fail("the newest was dropped"))[-1] == 3
    monkeypatch.setenv("TIDELENS_CACHE_MB", "lots")
    with pytest.raises(ConfigError, match="TIDELENS_CACHE_MB"):
        rc.cache_limit_bytes()


def test_a_folder_others_may_write_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickle runs code when read: a folder (or file) anyone else may write is refused, in words."""
    folder = tmp_path / "shared"
    monkeypatch.setenv("TIDELENS_CACHE_DIR", str(folder))
    scope = rc.Scope("e" * 16, "f" * 16)
    rc.remembered(scope, "x", 1, lambda: "mine")
    assert folder.stat().st_mode & 0o777 == 0o700
    rc.forget_in_memory()
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match="chmod go-w"):
        rc.remembered(scope, "x", 1, lambda: "mine")
    folder.chmod(0o700)
    (file,) = folder.glob("*.pkl")
    file.chmod(0o666)
    with pytest.raises(ConfigError, match=str(file.name)):
        rc.remembered(scope, "x", 1, lambda: "mine")


def test_sources_says_the_folder_and_its_bound(morning_db: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TIDELENS_CACHE_MB", "512")
    rc.remembered(rc.Scope("g" * 16, "h" * 16), "x", 1, lambda: bytes(2 << 20))
    out = _run(["sources", "--db", str(morning_db)])
    assert "result cache" in out and f"{tmp_path}, 1 files, 2.0 MiB of 512 MiB" in out


def test_arrays_are_keyed_by_every_element() -> None:
    """Two long arrays that differ only in the middle (which repr elides) are two keys."""
    import numpy as np

    a = np.zeros(5_000)
    b = a.copy()
    b[2_500] = 1.0
    assert repr(a) == repr(b) and rc.digest(a) != rc.digest(b) and rc.digest(a) == rc.digest(a.copy())


def test_a_fit_is_read_by_its_inputs_from_a_copy_of_the_store(morning_db: Path, tmp_path: Path) -> None:
    """A service's fit is keyed by the steps it fits, not the store: a copy of the store (another
    file, then a load of its own, which drops that file's older results) calibrates from the fit
    the first computed (in this run's cache: computed here, or by another module), read from disk,
    and arrives at the same scenario."""
    import shutil

    from analytics.slo import resolve_slos
    from analytics.whatif.calibrate import calibrate

    with Store(morning_db, read_only=True) as st:
        first = calibrate(st, service="recommender", slos=resolve_slos(st))
    copy = tmp_path / "copy.duckdb"
    shutil.copy(morning_db, copy)
    with Store(copy) as st:
        ingest_bytes(st, "other.prom", b"# TYPE other gauge\nother 1 60000\n")
    rc.forget_in_memory()
    with Store(copy, read_only=True) as st:
        again = calibrate(st, service="recommender", slos=resolve_slos(st))
    assert rc.counts()["fit"] == {"disk": 1}, rc.counts()
    assert again.service == first.service
    assert again.provenance["service.concurrency"] == first.provenance["service.concurrency"]
