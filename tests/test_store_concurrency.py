"""Several programs on one store file: loads queue for the lock or say who holds it, never a traceback.

DuckDB lets one process write a file (or several read it) at a time. Each case runs the real
``tidelens`` CLI in separate processes against a real store file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.sample.export import load_into, write_exports
from analytics.sample.sim import simulate
from analytics.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A store of one simulated day, and two more days as exposition files to ingest."""
    root = tmp_path_factory.mktemp("concurrent")
    db = root / "store.duckdb"
    with Store(db) as st:
        load_into(st, simulate("morning", days=1, gpus=16, seed=3))
    later = simulate("morning", days=3, gpus=16, seed=3)
    files = sorted(p for p in write_exports(later, root / "exports", formats=("prom-text",))
                   if p.name.endswith((".prom", ".prom.gz")))
    assert len(files) == 3
    return db, files[1:]  # the days the store does not hold yet


def _tidelens(*args: str, wait_s: float | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    if wait_s is not None:
        env["TIDELENS_LOCK_WAIT_S"] = str(wait_s)
    return subprocess.Popen([sys.executable, "-m", "analytics.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=240)
    return proc.returncode, out, err


def _totals(db: Path) -> dict:
    with Store(db, read_only=True) as st:
        return st.totals()


def test_a_held_store_is_reported_with_the_holders_pid_and_left_unchanged(world):
    db, files = world
    before = _totals(db)
    with Store(db):  # this process writes: the lock is held until the block ends
        ingest = _tidelens("ingest", "--db", str(db), str(files[0]), wait_s=0.3)
        events = _tidelens("events", "--db", str(db), "--json", wait_s=0.3)
        rc_i, _, err_i = _finish(ingest)
        rc_e, _, err_e = _finish(events)
    pid = os.getpid()
    assert rc_i == 2 and "Traceback" not in err_i
    assert f"{db}: another program (pid {pid}) has this store open" in err_i
    assert "Try again when it finishes" in err_i and "TIDELENS_LOCK_WAIT_S" in err_i
    assert rc_e == 2 and "Traceback" not in err_e
    assert f"{db}: another load is writing this store (pid {pid}); waited" in err_e
    assert _totals(db) == before


def test_two_ingests_and_an_events_read_at_once_all_finish(world):
    db, files = world
    before = _totals(db)
    # A wait long enough for the others on a loaded machine (the 10 s default ran out at a load
    # of 13 on two cores): what is tested is that they queue and all finish, not how fast.
    procs = [_tidelens("ingest", "--db", str(db), "--json", str(files[0]), wait_s=180),
             _tidelens("ingest", "--db", str(db), "--json", str(files[1]), wait_s=180),
             _tidelens("events", "--db", str(db), "--json", wait_s=180)]
    results = [_finish(p) for p in procs]
    for rc, _, err in results:
        assert "Traceback" not in err, err
        assert rc == 0, err
    loaded = [json.loads(out) for _, out, _ in results[:2]]
    assert all(r["sources"][0]["status"] == "loaded" for r in loaded), loaded
    assert isinstance(json.loads(results[2][1]), list)
    after = _totals(db)
    assert after["samples"] > before["samples"]
    # the same files again change nothing, whoever gets the lock first
    again = [_tidelens("ingest", "--db", str(db), "--json", str(f), wait_s=180) for f in files[:2]]
    for rc, out, err in (_finish(p) for p in again):
        assert rc == 0, err
        assert json.loads(out)["sources"][0]["status"] == "skipped"
    assert _totals(db) == after


def test_an_upload_while_the_cli_writes_says_so_on_the_page(world, monkeypatch, fixtures):
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_upload

    db, _ = world
    before = _totals(db)
    holder = subprocess.Popen([sys.executable, "-c", "import sys\nfrom analytics.store import Store\n"
                               f"st = Store({str(db)!r})\nprint('held', flush=True)\nsys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("TIDELENS_LOCK_WAIT_S", "0.2")
        data = (fixtures / "datadog_dcgm_t4_scrape.prom").read_bytes()
        outcome = load_upload(db, "scrape.prom", data, None, who=LOCAL_OPERATOR)
    finally:
        holder.communicate("", timeout=60)
    assert outcome.status == "failed"
    assert f"another program (pid {holder.pid}) has this store open" in outcome.message
    assert "internal error" not in outcome.message
    assert _totals(db) == before
