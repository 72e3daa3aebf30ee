"""The background prefetch: once a page has drawn, the heavy calls of the other pages (rhythm,
tail events, calibration) and the timelines at the other steps are computed in the
background, so a click on another page, or a step change, only reads caches."""

from __future__ import annotations

import dataclasses
import importlib
import threading
from pathlib import Path

import pytest
import streamlit as st  # noqa: E402
from apptest_helpers import open_settings  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import pages._prefetch as prefetch  # noqa: E402
from analytics.events.config import EventsConfig  # noqa: E402
from analytics.rhythm.config import RhythmConfig  # noqa: E402
from analytics.sample.export import load_into  # noqa: E402
from analytics.sample.sim import simulate  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.view import STEP_CHOICES_S  # noqa: E402

# The package exports a function named like this module: reach the module itself.
calibrate_mod = importlib.import_module("analytics.whatif.calibrate")
ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
PAGES = ("pages/rhythm.py", "pages/events.py", "pages/whatif.py", "pages/chargeback.py")


@pytest.fixture(scope="module")
def pool_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = simulate("morning", days=3, gpus=16, seed=7)
    db = tmp_path_factory.mktemp("prefetch") / "morning.duckdb"
    with Store(db) as s:
        load_into(s, res)
    return db


@pytest.fixture
def heavy_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, empty_results: Path):
    """Every heavy analytics call made, as (what, step, thread name); a prefetcher of our own."""
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(tmp_path / "uploads.duckdb"))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))
    monkeypatch.setenv(prefetch.PREFETCH_ENV, "1")
    # empty_results: nothing of any store computed before (the run's fits kept)
    prefetcher = prefetch.Prefetcher(delay_s=0.0)
    monkeypatch.setattr(prefetch, "PREFETCH", prefetcher)
    calls: list[tuple[str, int | None, str]] = []

    def counted(module, name: str, step_of) -> None:
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls.append((name, step_of(args, kwargs), threading.current_thread().name))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    # Counted where the pages call them (a page's module holds the name it imported).
    counted(importlib.import_module("pages._caches"), "store_timelines", lambda a, k: a[1].step_s)
    counted(importlib.import_module("pages._queries"), "rhythm_page_data", lambda a, k: k["step_s"])
    counted(importlib.import_module("pages._queries"), "analyse_timelines",
            lambda a, k: a[1].step_s)  # the Tail events page's one call
    counted(calibrate_mod, "calibrate_frames", lambda a, k: k["step_s"])
    st.cache_data.clear()
    st.cache_resource.clear()
    yield calls, prefetcher
    prefetcher.wait_idle(300)  # no thread outlives the test
    st.cache_data.clear()
    st.cache_resource.clear()


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _opened(db: Path, **params: str) -> AppTest:
    """The app opened from a link to ``db`` (and ``params``), its first run done."""
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db), **params})
    at.run()
    _no_exception(at)
    return at


def test_other_pages_and_steps_are_ready_before_the_click(pool_db: Path, heavy_calls,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls, prefetcher = heavy_calls
    # None of the library's own calibrations of this process (another test's may be of this store).
    monkeypatch.setattr(calibrate_mod, "_CALIBRATIONS", type(calibrate_mod._CALIBRATIONS)())
    at = _opened(pool_db)
    assert at.title[0].value == "Overview"
    # The Overview computed its own timelines in the script's thread...
    assert [(n, s) for n, s, thread in calls if thread != prefetch.THREAD_NAME] == [("store_timelines", 60)]
    assert prefetcher.wait_idle(300), "the prefetch did not finish"
    assert not prefetcher.failures, list(prefetcher.failures)
    # ...and the prefetch everything the other pages and steps need, once each (a calibration
    # for each service of the pool: the What-if's answer is judged over both).
    fetched = sorted((name, step) for name, step, thread in calls if thread == prefetch.THREAD_NAME)
    assert fetched == sorted([("analyse_timelines", 60), *[("calibrate_frames", 60)] * 2, ("rhythm_page_data", 60),
                              *(("store_timelines", s) for s in STEP_CHOICES_S if s != 60)])

    made_by_pages = len([c for c in calls if c[2] != prefetch.THREAD_NAME])
    for page in PAGES:
        at.switch_page(page).run()
        _no_exception(at)
    at.switch_page("pages/overview.py").run()
    open_settings(at)
    at.sidebar.selectbox(key="v_step").set_value(300).run()
    _no_exception(at)
    assert "step 5 min" in at.caption[0].value
    # Four pages and a step change later, no page has computed anything itself.
    assert len([c for c in calls if c[2] != prefetch.THREAD_NAME]) == made_by_pages


def test_off_switch_and_large_ranges(pool_db: Path, heavy_calls, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, prefetcher = heavy_calls
    monkeypatch.setenv(prefetch.PREFETCH_ENV, "0")
    at = _opened(pool_db)
    assert prefetcher.wait_idle(5) and all(c[2] != prefetch.THREAD_NAME for c in calls)

    # A range past the budget still gets the other pages' calls, but no other steps.
    monkeypatch.setattr(prefetch, "PREFETCH_MAX_SAMPLES", 1000)
    jobs = prefetch.prefetch_jobs(at.session_state["view"], at.session_state["view_source"], {})
    assert [j.key[0] for j in jobs] == ["imports", "timelines", "rhythm", "events", "calibration"]
    monkeypatch.setattr(prefetch, "PREFETCH_MAX_SAMPLES", 10**12)
    jobs = prefetch.prefetch_jobs(at.session_state["view"], at.session_state["view_source"], {})
    assert sorted(j.key[5] for j in jobs if j.key[0] == "timelines") == sorted(STEP_CHOICES_S)
    # The page on screen first, then the other pages, with the next coarser step before the
    # slowest of them (the calibration).
    assert [(j.key[0], j.key[5] if j.key[0] == "timelines" else None) for j in jobs][:6] == [
        ("imports", None), ("timelines", 60), ("rhythm", None), ("events", None), ("timelines", 300),
        ("calibration", None)]
    # A zoomed view: the whole span at its step right after it, for the zooms to come.
    view, src = at.session_state["view"], at.session_state["view_source"]
    with Store(pool_db, read_only=True) as s:
        zoom = dataclasses.replace(view, start_ms=s.totals()["first_ts_ms"] + 3_600_000)
    keys = [j.key for j in prefetch.prefetch_jobs(zoom, src, {})]
    assert keys[2][0] == "timelines" and keys[2][3:6] == (None, None, 60)


def test_a_zoom_is_cut_from_the_whole_span(pool_db: Path, heavy_calls, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, _ = heavy_calls
    monkeypatch.setenv(prefetch.PREFETCH_ENV, "0")
    at = _opened(pool_db)
    assert [c[:2] for c in calls] == [("store_timelines", 60)]
    open_settings(at)
    lo, hi = at.sidebar.slider(key="v_range").value
    zoom = (lo + (hi - lo) / 3, lo + (hi - lo) / 2)
    at.sidebar.slider(key="v_range").set_value(zoom).run()
    _no_exception(at)
    assert at.query_params.get("start") and at.query_params.get("end")
    assert [c[:2] for c in calls] == [("store_timelines", 60)], "the zoom read the store again"
    zoomed_kpis = {m.label: m.value for m in at.metric}
    # Streamlit's memory cache may drop the whole span (8 entries, shared): a zoom still cuts.
    st.cache_resource.clear()
    at.sidebar.slider(key="v_range").set_value((lo + (hi - lo) / 4, hi)).run()
    _no_exception(at)
    assert [c[:2] for c in calls] == [("store_timelines", 60)], "a dropped whole span was rebuilt"
    at.sidebar.slider(key="v_range").set_value(zoom).run()
    assert {m.label: m.value for m in at.metric} == zoomed_kpis

    # The same zoom opened from a link on a server that has never built the whole span.
    st.cache_resource.clear()
    st.cache_data.clear()
    importlib.import_module("pages._caches")._WHOLE_SPANS.clear()
    link = _opened(pool_db, start=at.query_params["start"], end=at.query_params["end"])
    assert len(calls) == 2  # built for the zoom this time
    assert {m.label: m.value for m in link.metric} == zoomed_kpis
    assert "Mean allocation" in zoomed_kpis



STOPS_EARLY = """
import streamlit as st
from pages._prefetch import prefetch_after_run
from pages._sidebar import page_setup

try:
    page_setup()
    st.stop()  # as a page does when it has nothing to show
finally:  # as app.py does after every page
    prefetch_after_run("events")
"""


def test_a_page_that_stops_early_still_prefetches(pool_db: Path, heavy_calls) -> None:
    calls, prefetcher = heavy_calls
    # After st.stop() Streamlit raises its stop again at the next call (session state too):
    # the prefetch reads the view the sidebar remembered instead.
    at = AppTest.from_string(STOPS_EARLY, default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(pool_db)})
    at.run()
    _no_exception(at)
    assert prefetcher.wait_idle(300)
    assert ("rhythm_page_data", 60, prefetch.THREAD_NAME) in calls


def test_a_page_own_settings_count_on_that_page_only(pool_db: Path, heavy_calls,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefetch.PREFETCH_ENV, "0")
    at = _opened(pool_db)
    view, src = at.session_state["view"], at.session_state["view_source"]
    left_behind = {"rhythm_tidal": 0.3, "ev_min_dur": 12.0, "w_svc": "chat-vllm"}

    def key(page: str, what: str) -> tuple:
        return next(j.key for j in prefetch.prefetch_jobs(view, src, left_behind, page)
                    if j.key[0] == what)

    # Streamlit drops a page's widget values once another page has run: elsewhere, defaults
    # (the analysis config's own, which the page's widgets start from too).
    assert key("overview", "rhythm")[1].tidal_share == RhythmConfig.tidal_share
    assert key("rhythm", "rhythm")[1].tidal_share == 0.3
    assert key("overview", "events")[1].min_duration_min == EventsConfig.min_duration_min == 5.0
    assert key("events", "events")[1].min_duration_min == 12.0
    # The What-if service is carried across pages: it always counts.
    assert key("overview", "calibration")[-2] == "chat-vllm"


def test_a_failed_job_is_tried_again() -> None:
    prefetcher = prefetch.Prefetcher(delay_s=0.0)
    runs: list[int] = []

    def flaky() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise OSError("Could not set lock on file: a writer holds it")

    job = prefetch.Job(("flaky",), flaky)
    prefetcher.submit([job])
    assert prefetcher.wait_idle(30) and len(prefetcher.failures) == 1
    prefetcher.submit([job])  # the next view asks again
    assert prefetcher.wait_idle(30) and len(runs) == 2
    prefetcher.submit([job])  # done now: not run a third time
    assert prefetcher.wait_idle(30) and len(runs) == 2


# A fresh interpreter: once ``analytics.charts`` is imported, a figure is built while another
# thread (the prefetch) is halfway through its first ``import pandas``. Plotly reads pandas from
# ``sys.modules`` without the import lock; a half-made pandas raised "partially initialized
# module 'pandas' has no attribute 'Series'" on the Overview of a fresh server.
RACE = '''
import importlib.abc, sys, threading
import analytics.charts.overview  # noqa: F401
from plotly.subplots import make_subplots
import plotly.graph_objects as go
ready, go_on = threading.Event(), threading.Event()

class Pause(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "pandas.core.api" and threading.current_thread().name == "prefetch":
            ready.set()  # pandas is in sys.modules, half made, until go_on
            go_on.wait(60)
        return None

def importer():
    try:
        import pandas  # noqa: F401
    finally:
        ready.set()

sys.meta_path.insert(0, Pause())
t = threading.Thread(target=importer, name="prefetch", daemon=True)
t.start()
ready.wait(60)
try:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True)
    fig.add_trace(go.Scatter(x=[1, 2, 3], y=[1, 3, 2]), row=1, col=1)
finally:
    go_on.set()
    t.join(60)
print(len(fig.data))
'''


def test_a_chart_built_while_the_prefetch_imports_pandas() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", RACE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"
