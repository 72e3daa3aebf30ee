"""What every page shares: the sidebar (view settings kept in the URL), the data source,
cached analytics calls, and a chart helper with CSV/SVG export.

Not a page: ``app.py`` does not register it. A page starts with ``v = page_setup()`` (or
``v = view()``), which draws the sidebar once per run and returns the view settings; it then
calls the ``cached_*`` functions for data and :func:`show_chart` for charts, so a page reads
as widgets -> one analytics call -> a chart.

Stores are opened read-only for reading and closed at once. Streamlit runs every browser
session (and the prefetch, ``pages/_analyses.py``) in a thread of the same process, and DuckDB
refuses a read-write connection to a file that the process also has open read-only: readers
share one process-wide lock, a writer (an upload) holds it alone.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import duckdb
import plotly.graph_objects as go
import polars as pl
import streamlit as st

from analytics.text import code, escape_figure, md, safe_csv, safe_table
from analytics.charts import PLOTLY_CONFIG, figure_image
from analytics.data_dir import data_dir
from analytics.errors import ConfigError, StoreBusyError
from analytics.store import Store
from analytics.view import (ALL_SERVICES, DEFAULT_SLO_MS, SOURCE_KINDS, STEP_CHOICES_S,
                            ViewSettings, format_slo, format_step, from_local_naive,
                            help_of, local_naive, parse_query_params, parse_slo,
                            uploads_db_path)

ROOT = Path(__file__).resolve().parent.parent
CONFIG_ENV = "TIDELENS_CONFIG"
URL_KEYS = ("source", "db", "start", "end", "step", "slo", "tz")


class StoreLock:
    """Any number of readers at once, or one writer (who may nest reads and writes).

    A waiting writer goes first: new readers wait for it, so a stream of reads (sessions, the
    prefetch) cannot hold an upload off forever. A thread already reading reads again without
    waiting (its read would otherwise deadlock behind the writer waiting for it), and may not
    start to write: DuckDB refuses a read-write connection to a file the process has open
    read-only.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._depth = 0
        self._writers_waiting = 0
        self._mine = threading.local()  # this thread's read depth

    @contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        depth = getattr(self._mine, "depth", 0)
        with self._cv:
            if depth == 0 and self._writer != me:
                self._cv.wait_for(lambda: self._writer is None and self._writers_waiting == 0)
            self._readers += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            with self._cv:
                self._readers -= 1
                self._cv.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        if getattr(self._mine, "depth", 0) and self._writer != me:
            raise RuntimeError("a store read is open in this thread: close it before writing")
        with self._cv:
            self._writers_waiting += 1
            try:
                self._cv.wait_for(lambda: self._writer == me
                                  or (self._writer is None and self._readers == 0))
            finally:
                self._writers_waiting -= 1
            self._writer = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cv:
                self._depth -= 1
                if self._depth == 0:
                    self._writer = None
                self._cv.notify_all()


_STORE_LOCK = StoreLock()
F = TypeVar("F", bound=Callable[..., Any])


# -- data source ----------------------------------------------------------------------------
@dataclass(frozen=True)
class DataSource:
    """The store a view reads: its file, a version that changes when the file does, or why not
    (``problem`` is Markdown-safe: its data-borne parts went through code() or md())."""

    label: str
    path: str | None
    version: str
    problem: str | None = None


def file_version(path: Path) -> str:
    """Changes whenever the store file does: keys the caches of everything read from it."""
    try:
        st_ = path.stat()
    except OSError:
        return "missing"
    wal = path.with_name(path.name + ".wal")
    wal_part = f"-{wal.stat().st_mtime_ns}" if wal.exists() else ""
    return f"{st_.st_mtime_ns}-{st_.st_size}{wal_part}"


@st.cache_resource(show_spinner="Building the bundled sample (first run only)...")
def _sample_path() -> str:
    from analytics.sample import ensure_default_store

    return str(ensure_default_store())


def resolve_source(v: ViewSettings) -> DataSource:
    """The store file of a view, or a problem that says what to do."""
    label = SOURCE_KINDS.get(v.source, v.source)
    if v.source == "sample":
        path = _sample_path()
        return DataSource(label, path, file_version(Path(path)))
    try:
        file = v.db_file(store_folder())
    except ConfigError as exc:
        return DataSource(label, None, "", md(str(exc)))
    if file is None:
        return DataSource(label, None, "", "Enter the path of a DuckDB store file in the sidebar.")
    if not file.exists():
        hint = ("Upload files on the Data page first." if v.source == "uploads"
                else "Check the path, upload files on the Data page to create it, or build one "
                     "with `tidelens ingest --db PATH FILES`.")
        return DataSource(label, str(file), "", f"No store at {code(file)}. {hint}")
    src = DataSource(label, str(file), file_version(file))
    try:
        cached_totals(src.path, src.version)
    except StoreBusyError as exc:
        # A writer (e.g. `tidelens ingest`) held the lock past the wait: say who, not a traceback.
        return DataSource(label, str(file), "", f"Cannot open {code(file)} now: {md(exc)}")
    except duckdb.Error as exc:
        return DataSource(label, str(file), "", f"Cannot open {code(file)}: {md(exc)}. Is it a "
                          "DuckDB store file?")
    return src


def store_folder() -> Path:
    """The data folder that store paths from links and the sidebar are confined to."""
    return data_dir(config_file())


def upload_target(v: ViewSettings) -> Path:
    """Where uploads are written: the chosen DuckDB file, else the uploads store (never the sample).

    Raises ConfigError when the chosen file is outside the data folder (nothing is created).
    """
    file = v.db_file(store_folder()) if v.source == "duckdb" else None
    return file if file is not None else uploads_db_path()


@contextmanager
def open_store(path: str | Path, *, read_only: bool = True) -> Iterator[Store]:
    with _STORE_LOCK.reading() if read_only else _STORE_LOCK.writing():
        store = Store(path, read_only=read_only)
        try:
            yield store
        finally:
            store.close()


# -- cached reads (keyed by file version, so a new load invalidates them) ----------------------
@st.cache_data(show_spinner=False, max_entries=32)
def cached_totals(path: str, version: str) -> dict[str, Any]:
    with open_store(path) as store:
        return store.totals()


@st.cache_data(show_spinner=False, max_entries=16)
def cached_inventory(path: str, version: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(sources, metrics)`` of a store."""
    with open_store(path) as store:
        return store.sources(), store.metrics()


@st.cache_data(show_spinner=False, max_entries=32)
def cached_series(path: str, version: str, metric: str) -> pl.DataFrame:
    with open_store(path) as store:
        return store.series(metric)


def config_file() -> Path:
    """``tidelens.toml``: the workload map the app reads and the Data page saves."""
    return Path(os.environ.get(CONFIG_ENV) or ROOT / "tidelens.toml")


def config_version() -> str:
    return file_version(config_file())


def load_workload_map() -> Any:
    from analytics.workloads import load_map

    return load_map(config_file())


@st.cache_data(show_spinner=False, max_entries=16)
def cached_workloads(path: str, version: str, map_version: str) -> pl.DataFrame:
    """Each workload in the store with its class, team and the rule that decided it."""
    from analytics.workloads import classify_workloads

    wmap = load_workload_map()
    with open_store(path) as store:
        return classify_workloads(store, wmap)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_links(path: str, version: str, map_version: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each autoscaler's link to its service and the rule that made it; how each exporter's
    GPUs without a pod label are classed."""
    from analytics.timeline import autoscaler_links, class_rules

    wmap = load_workload_map()
    with open_store(path) as store:
        return autoscaler_links(store, wmap), class_rules(store)


@dataclass
class UploadOutcome:
    """One uploaded file's result as the Data page lists it."""

    file: str
    status: str
    series: int = 0
    samples: int = 0
    message: str = ""


def load_upload(target: Path, name: str, data: bytes, at_ms: int | None) -> UploadOutcome:
    """Load one uploaded file into ``target`` through a short-lived read-write connection."""
    from analytics.errors import TidelensError
    from analytics.ingest import ingest_bytes, not_data_reason

    why = not_data_reason(Path(name))
    if why is not None:
        return UploadOutcome(name, "skipped", message=f"not a data file ({why})")
    try:
        with open_store(target, read_only=False) as store:
            r = ingest_bytes(store, name, data, at_ms=at_ms)
    except TidelensError as exc:
        return UploadOutcome(name, "failed", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - a parser bug must not take the page down
        return UploadOutcome(name, "failed", message=f"{name}: internal error "
                             f"({type(exc).__name__}: {exc}); please report it with the file")
    note = r.error or r.note or ""
    if r.status == "loaded" and r.duplicates:
        note = (note + "; " if note else "") + f"{r.duplicates} duplicate samples (last kept)"
    return UploadOutcome(name, r.status, r.series, r.samples, note)


def library_version(*modules: str) -> str:
    """Changes when the code of these library parts does (keys results cached on disk)."""
    parts = []
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            continue
        origin = Path(spec.origin)
        files = sorted(origin.parent.glob("*.py")) if origin.name == "__init__.py" else [origin]
        parts.extend(f"{f.name}:{f.stat().st_mtime_ns}" for f in files)
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def persisted(spinner: str, *code: str, max_entries: int = 8) -> Callable[[F], F]:
    """Cache a page's heavy analytics call in memory and on disk, keyed by its arguments and
    by the code of the library parts ``code`` names.

    In memory the result is one object shared by every session and rerun (``st.cache_data``
    alone would unpickle it on each rerun); on disk it outlives a restarted server, so a
    colleague opening the link tomorrow does not wait for the decomposition again. A change to
    the named library code, or to the store file (its version is an argument), misses.
    """
    def wrap(fn: F) -> F:
        # The decorated function's own source is part of the key: Streamlit keys both caches
        # by the generic wrappers below, whose source never changes.
        own_version = hashlib.sha1(inspect.getsource(fn).encode()).hexdigest()[:12]

        def compute(code_version: str, *args: Any) -> Any:
            value = fn(*args)
            _prune_disk_cache(on_disk, max_entries - 1)  # room for the file about to be written
            return value

        def load(code_version: str, *args: Any) -> Any:
            return on_disk(code_version, *args)

        # Streamlit keys a cache by the function's module, qualified name and source: give each
        # wrapped function's two caches names of their own.
        for inner, kind in ((compute, "disk"), (load, "memory")):
            inner.__module__ = fn.__module__
            inner.__qualname__ = f"{fn.__qualname__}[{kind}]"
        on_disk = st.cache_data(show_spinner=spinner, max_entries=max_entries,
                                persist="disk")(compute)
        in_memory = st.cache_resource(show_spinner=False, max_entries=max_entries)(load)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            return in_memory(f"{library_version(*code)}-{own_version}", *args)

        return call  # type: ignore[return-value]

    return wrap


def _prune_disk_cache(cached: Any, keep: int) -> None:
    """Keep the ``keep`` newest disk files of one cached function.

    Streamlit's ``max_entries`` bounds the memory layer only; every store version, code version
    and slider position would otherwise leave a file in ``~/.streamlit/cache`` for good.
    """
    from streamlit.file_util import get_streamlit_file_path

    key = getattr(cached, "_function_key", None)  # Streamlit's name for the function's files
    if not key:
        return
    files = sorted(Path(get_streamlit_file_path("cache")).glob(f"{key}-*.memo"),
                   key=lambda f: f.stat().st_mtime, reverse=True)
    for old in files[max(keep, 0):]:
        old.unlink(missing_ok=True)


TIMELINE_CODE = ("analytics.timeline", "analytics.counters", "analytics.workloads",
                 "analytics.sql.timeline", "analytics.sql.workloads", "analytics.store")


def cached_timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
                     step_s: int, map_version: str) -> dict[str, pl.DataFrame]:
    """Pool timeline, holdings and service timeline for one (source, range, step, map).

    Cached in memory and on disk: three weeks of a 64-GPU pool take seconds to reduce, and a
    restarted server (or a colleague's session) should not pay that again. A part of the
    data's span (a zoom) is cut from the whole span's timelines when this server has them
    (``analytics.timeline.slice_timelines``: equal to building it), in milliseconds.
    """
    code = library_version(*TIMELINE_CODE)
    whole_key = (path, version, step_s, map_version, code)
    if start_ms is None and end_ms is None:
        found = _timelines_shared(path, version, None, None, step_s, map_version, code)
        with _WHOLE_LOCK:
            _WHOLE_SPANS[whole_key] = found
            _WHOLE_SPANS.move_to_end(whole_key)
            while len(_WHOLE_SPANS) > 1 and (
                    len(_WHOLE_SPANS) > WHOLE_SPANS_KEPT
                    or sum(f.estimated_size() for tl in _WHOLE_SPANS.values()
                           for f in tl.values()) > WHOLE_SPANS_MAX_BYTES):
                _WHOLE_SPANS.popitem(last=False)
        return found
    with _WHOLE_LOCK:
        whole = _WHOLE_SPANS.get(whole_key)
    if whole is not None:
        return _cut_timelines(path, version, start_ms, end_ms, step_s, map_version, code)
    return _timelines_shared(path, version, start_ms, end_ms, step_s, map_version, code)


# The whole-span timelines last used (the frames themselves, so a zoom never rebuilds the
# whole span that Streamlit's cache may have dropped): a zoom is cut from them. As many as
# the steps a view offers, within a memory budget (the newest is always kept).
WHOLE_SPANS_KEPT = 8
WHOLE_SPANS_MAX_BYTES = 1 << 30
_WHOLE_SPANS: OrderedDict[tuple[Any, ...], dict[str, pl.DataFrame]] = OrderedDict()
_WHOLE_LOCK = threading.Lock()


@st.cache_resource(show_spinner=False, max_entries=16)
def _cut_timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
                   step_s: int, map_version: str, code_version: str) -> dict[str, pl.DataFrame]:
    with _WHOLE_LOCK:
        whole = _WHOLE_SPANS.get((path, version, step_s, map_version, code_version))
    if whole is None:  # dropped meanwhile: build the zoom itself
        return _timelines_shared(path, version, start_ms, end_ms, step_s, map_version, code_version)
    from analytics.timeline import slice_timelines

    return slice_timelines(whole, step_s, start_ms, end_ms)


@st.cache_resource(show_spinner=False, max_entries=8)
def _timelines_shared(path: str, version: str, start_ms: int | None, end_ms: int | None,
                      step_s: int, map_version: str,
                      code_version: str) -> dict[str, pl.DataFrame]:
    # One copy in memory shared by every session and rerun: st.cache_data would unpickle the
    # frames (tens of MB for three weeks) on every rerun. Polars frames are not mutated in place.
    return _timelines(path, version, start_ms, end_ms, step_s, map_version, code_version)


@st.cache_data(show_spinner="Building timelines (first time for this source, range and step)...",
               max_entries=16, persist="disk")
def _timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
               step_s: int, map_version: str, code_version: str) -> dict[str, pl.DataFrame]:
    from analytics.timeline import TimelineConfig, timelines

    _prune_disk_cache(_timelines, 15)  # room for the file about to be written
    wmap = load_workload_map()
    cfg = TimelineConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms)
    with open_store(path) as store:
        return timelines(store, cfg, wmap).as_dict()  # one device pass for all three


@st.cache_data(show_spinner=False, max_entries=16)
def cached_signal_report(path: str, version: str) -> pl.DataFrame:
    """Which signals the store has, and what each missing one costs (the timeline's report)."""
    from analytics.timeline import signal_report

    with open_store(path) as store:
        return signal_report(store)


# -- sidebar --------------------------------------------------------------------------------
def _seed_from_url() -> None:
    """First run of a session: the URL decides every setting (a shared link reopens the view)."""
    ss = st.session_state
    seed, problems = parse_query_params(st.query_params.to_dict())
    ss["v_seeded"] = True
    ss["v_problems"] = problems
    ss["v_source"] = seed.source
    ss["v_db"] = seed.db_path or ""
    ss["v_step"] = seed.step_s
    per = {k: v for k, v in seed.slo_ms.items() if k != ALL_SERVICES}
    ss["v_slo"] = float(seed.slo_ms.get(ALL_SERVICES, DEFAULT_SLO_MS))
    ss["v_slo_per"] = format_slo(per)
    ss["v_tz"] = seed.tz
    ss["v_range_ms"] = (seed.start_ms, seed.end_ms)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_known_slos(path: str, version: str, map_version: str) -> tuple[tuple[str, float], ...]:
    """The SLOs tidelens.toml and the store declare per service (what the CLI reads too)."""
    from analytics.slo import resolve_slos

    with open_store(path) as store:
        table = resolve_slos(store, config=config_file())
    return tuple(sorted((k, v[0]) for k, v in table.per_service.items()))


def _known_slos(src: DataSource) -> tuple[tuple[str, float], ...]:
    if src.problem or not src.path:
        return ()
    return cached_known_slos(src.path, src.version, config_version())


def _zone_options(seeded: str) -> list[str]:
    """UTC, the browser's zone and the link's first, then every IANA zone (type to search)."""
    browser = st.context.timezone
    options = ["UTC"]
    for z in (browser, seeded):
        if z and z not in options:
            options.append(z)
    return options + [z for z in _all_zones() if z not in options]


@functools.lru_cache(maxsize=1)
def _all_zones() -> tuple[str, ...]:
    import zoneinfo

    return tuple(sorted(zoneinfo.available_timezones()))


def _range_slider(src: DataSource, tz: str, step_s: int) -> tuple[int | None, int | None]:
    """The time range: a slider over the data's span, in the display zone; returns UTC ms."""
    ss = st.session_state
    want = ss.get("v_range_ms", (None, None))
    if src.problem or not src.path:
        return want
    totals = cached_totals(src.path, src.version)
    first, last = totals.get("first_ts_ms"), totals.get("last_ts_ms")
    if first is None or last is None or last <= first:
        return want
    start, end = ViewSettings(start_ms=want[0], end_ms=want[1]).clamp_range(first, last)
    sig = (src.path, first, last, tz)
    if ss.get("v_range_sig") != sig:
        # New data span or zone: rebuild the slider from the canonical UTC range.
        ss["v_range"] = (local_naive(start, tz), local_naive(end, tz))
        ss["v_range_sig"] = sig
    lo, hi = local_naive(first, tz), local_naive(last, tz)
    span_s = (last - first) / 1000
    slider_step = timedelta(minutes=1) if span_s <= 14 * 86400 else timedelta(minutes=15)
    picked = st.slider("Time range", min_value=lo, max_value=hi, step=slider_step,
                       key="v_range", format="MMM D, HH:mm", help=help_of("start_ms"))
    a, b = (from_local_naive(picked[0], tz), from_local_naive(picked[1], tz))
    # The whole span is "follow the data": no range in the URL.
    a_out = None if a <= first else a
    b_out = None if b >= last else b
    ss["v_range_ms"] = (a_out, b_out)
    return a_out, b_out


# What-if and Chargeback scenarios (policies, parameters, prices), the Data page's pull and
# NVML forms, and the tab or panel a page had open survive a visit to another page, a folded
# panel and a switched tab. Buttons, uploaders and tables cannot be assigned, and need not be.
PAGE_STATE_PREFIXES = ("w_", "cb_", "pull_", "nvml_")
PAGE_VIEW_KEYS = ("rhythm_view", "ev_view", "data_add", "ov_signals", "inv_series", "upload_at")
NOT_ASSIGNABLE = frozenset({"w_upload"})
NOT_ASSIGNABLE_SUFFIXES = ("_go", "_table")


def _page_keys(ss: Any) -> list[str]:
    return [k for k in ss if isinstance(k, str) and k not in NOT_ASSIGNABLE
            and not k.endswith(NOT_ASSIGNABLE_SUFFIXES)
            and (k.startswith(PAGE_STATE_PREFIXES) or k in PAGE_VIEW_KEYS)]


WIDGET_KEYS = ("v_source", "v_db", "v_step", "v_tz", "v_range", "v_slo", "v_slo_per")


def page_setup() -> ViewSettings:
    """What a page calls first: page config and the sidebar; returns this run's settings."""
    st.set_page_config(page_title="Tidelens", page_icon=str(ROOT / "static" / "favicon.png"), layout="wide")
    return view()


def _through_app_navigation() -> None:
    """Rerun through ``app.py`` when Streamlit ran a page file directly.

    A server that finds a ``pages/`` folder starts in Streamlit's folder-based multipage mode
    until ``app.py`` has called ``st.navigation`` once. A link to a page opened before that
    (the first deep link after a restart) runs the page file alone, and the sidebar then lists
    every file of the folder, helpers included, for every later session too. Streamlit leaves
    that mode the same way ``st.navigation`` does: by clearing this flag.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        # Only on a session's first run, which has no click to lose. (AppTest resets the flag
        # before every run; its later runs keep running the page file directly, as before.)
        if "v_seeded" not in st.session_state:
            st.rerun()


def _run_token() -> object | None:
    """An object unique to the current script run (Streamlit replaces its cursor table each run)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.cursors


def view() -> ViewSettings:
    """The settings of this run; the first call in a run draws the sidebar.

    Pages draw the sidebar (through this) rather than ``app.py``: Streamlit may run a file of
    ``pages/`` directly, without the entry point (the first deep link after a restart; every
    ``AppTest`` rerun); such a run goes round once more through ``app.py``'s navigation.
    """
    ss = st.session_state
    token = _run_token()
    if token is None:  # bare mode (no Streamlit run): nothing to draw
        return ss.get("view", ViewSettings())
    _through_app_navigation()
    if ss.get("_view_token") is not token:
        render_sidebar()
        ss["_view_token"] = token
    return ss["view"]


def render_sidebar() -> ViewSettings:
    """Draw the sidebar, keep the URL in step with it, and return this run's settings.

    The settings sit in a folded panel that runs only when opened: a page's first render
    then draws one summary line instead of eight widgets (about half a second of a slow
    browser's time, on every page). The values live in session state either way, so a
    folded panel keeps them, and the URL holds them for a copied link.
    """
    ss = st.session_state
    if "v_seeded" not in ss:
        _seed_from_url()
    else:
        # Streamlit forgets a widget's value when a run does not draw it (another page, or
        # the panel folded); re-assigning carries the value across.
        for key in (*WIDGET_KEYS, "v_open", *_page_keys(ss)):
            if key in ss:
                ss[key] = ss[key]
    with st.sidebar:
        for problem in ss.get("v_problems", []):
            st.warning(md(f"Link setting {problem}"), icon=":material/link_off:")
        summary = st.empty()
        panel = st.expander("View settings", icon=":material/tune:", key="v_open",
                            on_change="rerun")
        if panel.open:
            with panel:
                settings, src = _settings_widgets()
        else:
            settings, src = _settings_from_state()
        span = cached_totals(src.path, src.version) if src.path and not src.problem else {}
        summary.caption(f"**{md(src.label)}** · "
                        + md(settings.describe(span.get("first_ts_ms"), span.get("last_ts_ms"))))
        if src.problem:
            st.caption(src.problem)  # Markdown-safe where built (resolve_source)
        elif src.path:
            st.caption(f"Store: {md(src.path)}")
    ss["view"] = settings
    ss["view_source"] = src
    _remember_run_view(settings, src, ss)
    _sync_url(settings)
    return settings


_RUN_VIEWS: OrderedDict[int, tuple[ViewSettings, DataSource, dict[str, Any]]] = OrderedDict()
_RUN_VIEWS_LOCK = threading.Lock()


def _remember_run_view(settings: ViewSettings, src: DataSource, ss: Any) -> None:
    # A shallow copy of the session's state: the page settings the prefetch reads
    # (pages/_analyses.prefetch_jobs) are among them, whichever they are.
    state = ss.to_dict()
    with _RUN_VIEWS_LOCK:
        _RUN_VIEWS[threading.get_ident()] = (settings, src, state)
        while len(_RUN_VIEWS) > 64:  # script threads whose run never asked for it
            _RUN_VIEWS.popitem(last=False)


def take_run_view() -> tuple[ViewSettings, DataSource, dict[str, Any]] | None:
    """The view, data source and page settings this thread's run drew, once.

    Makes no Streamlit call: it is read after the page has run, also after an ``st.stop()``,
    when Streamlit raises its stop again at the next call.
    """
    with _RUN_VIEWS_LOCK:
        return _RUN_VIEWS.pop(threading.get_ident(), None)


def _slo_settings(slo_all: float, slo_text: str, *, show_error: bool) -> dict[str, float]:
    slo = {ALL_SERVICES: float(slo_all)}
    if slo_text.strip():
        try:
            per = parse_slo(slo_text)
            per.pop(ALL_SERVICES, None)
            slo.update(per)
        except ValueError as exc:
            if show_error:
                st.error(f"Per-service SLOs ignored: {exc}")
    return slo


def _settings_widgets() -> tuple[ViewSettings, DataSource]:
    """The settings panel, open: every setting as a widget."""
    ss = st.session_state
    source = st.radio("Data source", list(SOURCE_KINDS), key="v_source",
                      format_func=SOURCE_KINDS.__getitem__, help=help_of("source"))
    db = st.text_input("DuckDB file path", key="v_db", disabled=source != "duckdb",
                       placeholder="/path/to/tidelens.duckdb", help=help_of("db_path"))
    steps = list(STEP_CHOICES_S)
    if ss.get("v_step") not in steps:
        steps = sorted({*steps, int(ss.get("v_step") or 60)})
    step_s = st.selectbox("Analysis step", steps, key="v_step", format_func=format_step,
                          help=help_of("step_s"))
    zones = _zone_options(ss.get("v_tz", "UTC"))
    if ss.get("v_tz") not in zones:
        ss["v_tz"] = "UTC"
    browser = st.context.timezone
    tz = st.selectbox("Show times in", zones, key="v_tz",
                      format_func=lambda z: f"Local ({z})" if z == browser and z != "UTC" else z,
                      help=help_of("tz") + " Type to find any IANA zone (e.g. Asia/Tokyo).")
    draft = ViewSettings(source=source, db_path=(db or None) if source == "duckdb" else None)
    src = resolve_source(draft)
    start_ms, end_ms = _range_slider(src, tz, step_s)
    slo_all = st.number_input("p99 SLO (ms), services without their own", min_value=0.1, step=10.0,
                              key="v_slo", help=help_of("slo_ms") + " A service's own SLO comes from the "
                              "per-service setting below, else tidelens.toml's [slo], else the store.")
    slo_text = st.text_input("Per-service SLOs (ms)", key="v_slo_per",
                             placeholder="chat-vllm:500, recommender:100")
    slo = _slo_settings(slo_all, slo_text, show_error=True)
    return ViewSettings(source=source, db_path=draft.db_path, start_ms=start_ms, end_ms=end_ms,
                        step_s=int(step_s), slo_ms=slo, tz=tz, slo_known=_known_slos(src)), src


def _settings_from_state() -> tuple[ViewSettings, DataSource]:
    """The settings panel, folded: the same settings read from session state, no widgets."""
    ss = st.session_state
    source = ss.get("v_source", "sample")
    db = ss.get("v_db") or None
    draft = ViewSettings(source=source, db_path=db if source == "duckdb" else None)
    src = resolve_source(draft)
    start_ms, end_ms = ss.get("v_range_ms", (None, None))
    if src.path and not src.problem:
        totals = cached_totals(src.path, src.version)
        first, last = totals.get("first_ts_ms"), totals.get("last_ts_ms")
        if first is not None and last is not None and last > first:
            start_ms, end_ms = ViewSettings(start_ms=start_ms, end_ms=end_ms).clamp_range(first, last)
            # The whole span is "follow the data": no range in the URL.
            start_ms = None if start_ms <= first else start_ms
            end_ms = None if end_ms >= last else end_ms
    tz = ss.get("v_tz", "UTC")
    slo = _slo_settings(ss.get("v_slo", DEFAULT_SLO_MS), ss.get("v_slo_per", ""), show_error=False)
    return ViewSettings(source=source, db_path=draft.db_path, start_ms=start_ms, end_ms=end_ms,
                        step_s=int(ss.get("v_step", 60)), slo_ms=slo, tz=tz, slo_known=_known_slos(src)), src


def seed_from_link(key: str, param: str, parse: Callable[[str], Any] = str,
                   valid: Callable[[Any], bool] = lambda _: True) -> None:
    """A page widget's first value from the link's ``param`` (once a session, when it parses and
    is valid); :func:`keep_in_link` writes it back, so a copied link opens the same choice."""
    ss = st.session_state
    seeded = f"_seeded_{key}"
    if seeded in ss:
        return
    ss[seeded] = True
    raw = st.query_params.get(param)
    if raw is None:
        return
    try:
        value = parse(raw)
    except (TypeError, ValueError):
        return
    if valid(value):
        ss[key] = value


def keep_in_link(param: str, value: Any, default: Any = None) -> None:
    """Put a page widget's value in the URL (dropped when it is the default)."""
    text = None if value is None or value == default else (f"{value:g}" if isinstance(value, float) else str(value))
    if text is None:
        if param in st.query_params:
            del st.query_params[param]
    elif st.query_params.get(param) != text:
        st.query_params[param] = text


def _sync_url(settings: ViewSettings) -> None:
    want = settings.to_query_params()
    for key in URL_KEYS:
        if key in want:
            if st.query_params.get(key) != want[key]:
                st.query_params[key] = want[key]
        elif key in st.query_params:
            del st.query_params[key]


def source() -> DataSource:
    """The data source of this run (resolved by the sidebar)."""
    view()
    found = st.session_state.get("view_source")
    return found if found is not None else resolve_source(view())


# -- KPIs -----------------------------------------------------------------------------------
def kpi_row(n: int) -> list[Any]:
    """``n`` slots for KPIs in one row that wraps on a narrow screen (a 1280x720 projector cut
    five fixed columns' labels and values with an ellipsis); ``row[i].metric(...)`` as columns."""
    row = st.container(horizontal=True, wrap=True)
    return [row] * n


# -- tables ---------------------------------------------------------------------------------
def show_table(frame: Any, *, where: Any = None, **kwargs: Any) -> Any:
    """``st.dataframe`` of a frame made safe to draw and to download (its own CSV button):
    controls shown escaped, formula-like cells neutralised (analytics.text.safe_table)."""
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame(frame)
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    return (where or st).dataframe(safe_table(frame), **kwargs)


# -- charts ---------------------------------------------------------------------------------
def show_chart(fig: go.Figure, data: pl.DataFrame, name: str) -> None:
    """A chart with the toolbar's PNG export, and an Export menu: its data as CSV, the figure as SVG.

    ``theme=None`` keeps the Tidelens template (large type, class colours) instead of
    Streamlit's. The menu's buttons are drawn only once it is opened, and the CSV and SVG are
    made only when their button is clicked: a page's first render pays for neither.
    """
    fig = escape_figure(fig)  # trace names, hover text and custom data come from labels
    data = safe_csv(data)  # no cell a spreadsheet would run
    st.plotly_chart(fig, theme=None, key=f"chart_{name}", config=PLOTLY_CONFIG | {
        "toImageButtonOptions": {"format": "png", "scale": 2, "filename": f"tidelens-{name}"}})
    menu = st.popover("Export", icon=":material/download:", key=f"export_{name}",
                      on_change="rerun", type="tertiary",
                      help="This chart's data as CSV, or the chart as an SVG image")
    if not menu.open:
        return
    with menu:
        st.download_button("CSV", data=lambda: data.write_csv(), file_name=f"tidelens-{name}.csv",
                           mime="text/csv", key=f"csv_{name}", on_click="ignore",
                           icon=":material/table:", help="The data behind this chart")
        st.download_button("SVG", data=lambda: figure_image(fig, "svg"),
                           file_name=f"tidelens-{name}.svg", mime="image/svg+xml",
                           key=f"svg_{name}", on_click="ignore", icon=":material/image:",
                           help="This chart as a vector image (rendered on the server)")


def require_source() -> DataSource | None:
    """The data source, or ``None`` after telling the user why there is none."""
    src = source()
    if src.problem or not src.path:
        st.warning(src.problem or "No data source.", icon=":material/database_off:")
        return None
    return src


__all__ = ["DataSource", "cached_inventory", "cached_series", "cached_signal_report",
           "cached_timelines", "cached_totals", "cached_workloads", "config_file",
           "config_version", "load_upload", "load_workload_map", "UploadOutcome",
           "open_store", "page_setup", "persisted", "render_sidebar", "require_source",
           "kpi_row", "resolve_source", "seed_from_link", "keep_in_link", "show_chart", "show_table",
           "source", "upload_target", "view"]
