"""Shared fixtures: an in-memory store that is always closed, and paths to fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from analytics.store import Store
from apptest_helpers import morning_store

FIXTURES = Path(__file__).parent / "fixtures"

# The app's background prefetch (pages/_prefetch.py) stays off in AppTests, which would
# otherwise leave a thread computing after each test; tests/test_app_prefetch.py and the
# browser test's real server turn it on.
os.environ.setdefault("TIDELENS_PREFETCH", "0")

# Many unit tests build stores by hand at epoch-zero times (minute 1 = 60,000 ms). The plausible
# time window (analytics.store.plausible_window_ms: 2000-01-01 .. now + 1 day by default) would
# refuse them; the tests of the window itself (tests/test_ingest_hostile.py) set it explicitly.
os.environ.setdefault("TIDELENS_TIME_WINDOW", "1970-01-01,now+1d")

# App tests open stores by ``?db=`` in pytest's temporary folders; the data folder that such paths
# are confined to (analytics.data_dir) is therefore the system's temporary folder, which holds
# them. tests/test_data_dir.py sets its own to show the fence.
os.environ.setdefault("TIDELENS_DATA_DIR", tempfile.gettempdir())


@pytest.fixture(scope="session", autouse=True)
def _result_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    """The one result cache (analytics.resultcache) in this run's temporary folder, never the
    user's, shared by the run's workers as two processes of a user share it: a result keyed by a
    store names that store's file (each worker builds its own), a result keyed by its inputs (a
    service's fit) is computed once for the run. The CLI's subprocesses and the notebooks'
    kernels inherit it."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker_id != "master" else base) / "results"
    os.environ["TIDELENS_CACHE_DIR"] = str(folder)


@pytest.fixture
def empty_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A result cache with nothing of any store in it, for a test that counts what a cold store
    computes; the run's fits (results keyed by their inputs alone, never by a store) are copied in,
    and the ones the test computes copied back for the rest of the run."""
    import shutil

    from analytics.resultcache import INPUTS_SCOPE

    shared = Path(os.environ["TIDELENS_CACHE_DIR"])
    folder = tmp_path / "results"
    folder.mkdir(mode=0o700)
    pattern = f"{INPUTS_SCOPE.store}-{INPUTS_SCOPE.content}-*.pkl"
    for f in shared.glob(pattern):
        shutil.copy2(f, folder / f.name)
    monkeypatch.setenv("TIDELENS_CACHE_DIR", str(folder))
    yield folder
    shared.mkdir(mode=0o700, exist_ok=True)
    for f in folder.glob(pattern):
        if not (shared / f.name).exists():  # whole or not at all, as the cache writes its own
            shutil.copy2(f, shared / f".{f.name}.tmp")
            os.replace(shared / f".{f.name}.tmp", shared / f.name)


@pytest.fixture(scope="session")
def morning_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three weekdays of the simulator's morning story on 64 GPUs (seed 7) in a store file, built
    once per worker for every module that reads it (apptest_helpers.morning_store): the
    cross-page and cross-command tests, the review's, the timelines owner's, Grafana's and the
    forecast's. Read only: a test that loads into a store copies it first."""
    return morning_store(tmp_path_factory.mktemp("morning") / "morning.duckdb")


@pytest.fixture(scope="session")
def simulated_store(tmp_path_factory: pytest.TempPathFactory):
    """``simulated_store(scenario, days=, gpus=, seed=)``: a store file of that simulation and its
    truth (analytics.sample.truth), built once per worker per arguments for every module that asks
    (the same run was simulated and loaded by several modules). Read only: a test that loads into
    the store copies it first."""
    from analytics.sample import load_into, simulate, truth

    built: dict[tuple, tuple[Path, dict]] = {}

    def build(scenario: str = "morning", **kw) -> tuple[Path, dict]:
        key = (scenario, tuple(sorted(kw.items())))
        if key not in built:
            res = simulate(scenario, **kw)
            path = tmp_path_factory.mktemp(f"sim-{scenario}") / f"{scenario}.duckdb"
            with Store(path) as st:
                load_into(st, res)
            built[key] = (path, truth(res))
        return built[key]

    return build


@pytest.fixture
def store():
    st = Store(":memory:")
    try:
        yield st
    finally:
        st.close()


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
