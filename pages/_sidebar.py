"""The sidebar and the URL: which store a view reads, every view setting as a widget kept in
the link (a shared link reopens the same view), and the page settings carried across pages.

A page starts with ``v = page_setup()`` (or ``v = view()``), which draws the sidebar once per
run and returns the view settings; :func:`seed_from_link` and :func:`keep_in_link` put a page's
own choices (an event, a price) in the URL too.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import duckdb
import streamlit as st

from analytics.errors import ConfigError, StoreBusyError, StoreFileError
from analytics.sample import ensure_default_store
from analytics.slo import MAX_SLO_MS, SloTable
from analytics.text import code, md
from analytics.times import from_local_naive, local_naive
from analytics.view import (
    ALL_SERVICES,
    DEFAULT_SLO_MS,
    SOURCE_KINDS,
    STEP_CHOICES_S,
    ViewSettings,
    format_slo,
    format_step,
    help_of,
    parse_query_params,
    parse_slo,
)
from pages._access import gate
from pages._caches import cached_known_slos, cached_totals
from pages._store import ROOT, DataSource, config_version, file_version, store_folder

URL_KEYS = ("source", "db", "start", "end", "step", "slo", "tz")


@st.cache_resource(show_spinner="Building the bundled sample (first run only)...")
def _sample_path() -> str:
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
    except StoreFileError as exc:
        # Not a store Tidelens wrote (a pipe, another format, views or macros): refused unread.
        return DataSource(label, str(file), "", f"Cannot open {code(file)}: {md(exc.reason)}")
    except duckdb.Error as exc:
        return DataSource(label, str(file), "", f"Cannot open {code(file)}: {md(exc)}. Is it a "
                          "DuckDB store file?")
    return src


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


def _known_slos(src: DataSource) -> SloTable:
    if src.problem or not src.path:
        return SloTable()
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
NOT_ASSIGNABLE_SUFFIXES = ("_go", "_table", "_download")  # buttons, tables, downloads


def _page_keys(ss: Any) -> list[str]:
    return [k for k in ss if isinstance(k, str) and k not in NOT_ASSIGNABLE
            and not k.endswith(NOT_ASSIGNABLE_SUFFIXES)
            and (k.startswith(PAGE_STATE_PREFIXES) or k in PAGE_VIEW_KEYS)]


WIDGET_KEYS = ("v_source", "v_db", "v_step", "v_tz", "v_range", "v_slo", "v_slo_per")


def page_setup() -> ViewSettings:
    """What a page calls first: page config and the sidebar; returns this run's settings."""
    st.set_page_config(page_title="Tidelens", page_icon=str(ROOT / "static" / "favicon.png"), layout="wide")

    gate()  # a visitor with no role (a shared server's, not signed in) sees the sign-in only
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
    # (pages/_prefetch.prefetch_jobs) are among them, whichever they are.
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
    slo_all = st.number_input("p99 SLO (ms), services without their own", min_value=0.1, max_value=MAX_SLO_MS,
                              step=10.0,
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
                   valid: Callable[[Any], bool] = lambda _: True, default: Any = None) -> None:
    """A page widget's first value from the link's ``param`` (once a session, when it parses and
    is valid); :func:`keep_in_link` writes it back, so a copied link opens the same choice.

    With ``default``, a widget without a value (a new session, or after another page ran: Streamlit
    then drops the page's widget values) starts from it; the widget itself is drawn without
    ``value=`` (a widget given both a default and a Session State value makes Streamlit warn).
    """
    ss = st.session_state
    seeded = f"_seeded_{key}"
    if seeded not in ss:
        ss[seeded] = True
        raw = st.query_params.get(param)
        if raw is not None:
            try:
                value = parse(raw)
            except (TypeError, ValueError):
                value = None
            if value is not None and valid(value):
                ss[key] = value
    if default is not None and key not in ss:
        ss[key] = default


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


def require_source() -> DataSource | None:
    """The data source, or ``None`` after telling the user why there is none."""
    src = source()
    if src.problem or not src.path:
        st.warning(src.problem or "No data source.", icon=":material/database_off:")
        return None
    return src
