"""The app's caches: the store's cheap reads (keyed by the file's version, so a new load
invalidates them), the memory layer of heavy results (:func:`persisted`) over the library's one
result cache on disk (:mod:`analytics.resultcache`, which the CLI and notebooks read too), and
the timelines every page reads, with zooms cut from the whole span.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import polars as pl
import streamlit as st

from analytics.codeversion import code_digest
from analytics.slo import SloTable, resolve_slos
from analytics.timeline import (
    TimelineConfig,
    Timelines,
    autoscaler_links,
    class_rules,
    signal_report,
    slice_timelines,
    store_timelines,
)
from analytics.timeline.provenance import request_log_summary
from analytics.workloads import classify_workloads
from pages._store import config_file, load_workload_map, open_store

F = TypeVar("F", bound=Callable[..., Any])
_OUTSIDE = threading.local()


@contextmanager
def outside_a_run() -> Iterator[None]:
    """Cached calls made outside any script run on purpose (the prefetch thread, a deferred
    download's callable): Streamlit's "missing ScriptRunContext" warning is dropped for them,
    and only for them (the browser test fails on any warning in the server's log)."""
    before = getattr(_OUTSIDE, "on", False)
    _OUTSIDE.on = True
    try:
        yield
    finally:
        _OUTSIDE.on = before


class _NoContextWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_OUTSIDE, "on", False)


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
    _NoContextWarning())


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


@st.cache_data(show_spinner=False, max_entries=16)
def cached_workloads(path: str, version: str, map_version: str) -> pl.DataFrame:
    """Each workload in the store with its class, team and the rule that decided it."""

    wmap = load_workload_map()
    with open_store(path) as store:
        return classify_workloads(store, wmap)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_links(path: str, version: str, map_version: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each autoscaler's link to its service and the rule that made it; how each exporter's
    GPUs without a pod label are classed."""

    wmap = load_workload_map()
    with open_store(path) as store:
        return autoscaler_links(store, wmap), class_rules(store)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_request_logs(path: str, version: str, map_version: str) -> pl.DataFrame:
    """Each service of the store's request logs, and whether its log or its histogram gives its numbers."""

    wmap = load_workload_map()
    with open_store(path) as store:
        return request_log_summary(store, wmap)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_signal_report(path: str, version: str) -> pl.DataFrame:
    """Which signals the store has, and what each missing one costs (the timeline's report)."""

    with open_store(path) as store:
        return signal_report(store)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_known_slos(path: str, version: str, map_version: str) -> SloTable:
    """The SLOs tidelens.toml and the store declare per service (what the CLI reads too)."""

    with open_store(path) as store:
        return resolve_slos(store, config=config_file())


def library_version() -> str:
    """Changes when the content of any module of the library does (keys results cached on disk):
    :func:`analytics.codeversion.code_digest`."""
    return code_digest()


def persisted(spinner: str | bool, *, max_entries: int = 8) -> Callable[[F], F]:
    """Cache a page's heavy analytics call in memory, keyed by its arguments and by the content
    of the library's code (:func:`library_version`).

    In memory the result is one object shared by every session and rerun (``st.cache_data``
    would unpickle it on each rerun). Below it is the library's one result cache
    (:mod:`analytics.resultcache`, on disk): the timelines, events, rhythm and calibrations the
    call reads are kept there, keyed by the store's content, so a restarted server, the CLI and a
    notebook read what this server computed, and it reads what they did. A change to the
    library's code, or to the store file (its version is an argument), misses.
    ``max_entries`` bounds the memory layer.
    """

    def wrap(fn: F) -> F:
        # The decorated function's own source is part of the key: Streamlit keys the cache by
        # the generic wrapper below, whose source never changes.
        own_version = hashlib.sha1(inspect.getsource(fn).encode()).hexdigest()[:12]

        def load(code_version: str, *args: Any) -> Any:
            return fn(*args)

        # Streamlit keys a cache by the function's module, qualified name and source: give each
        # wrapped function's cache a name of its own.
        load.__module__ = fn.__module__
        load.__qualname__ = f"{fn.__qualname__}[memory]"
        in_memory = st.cache_resource(show_spinner=spinner, max_entries=max_entries)(load)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            return in_memory(f"{library_version()}-{own_version}", *args)

        return call  # type: ignore[return-value]

    return wrap


def cached_timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
                     step_s: int, map_version: str) -> Timelines:
    """Pool timeline, holdings and service timeline for one (source, range, step, map).

    Built once per (source, range, step, map) and kept like every heavy result
    (:func:`persisted`: one copy in memory for every session, a file on disk for a restarted
    server). A part of the data's span (a zoom) is cut from the whole span's timelines when
    this server has them (``analytics.timeline.slice_timelines``: equal to building it), in
    milliseconds.
    """
    whole_key = (path, version, step_s, map_version, library_version())
    if start_ms is None and end_ms is None:
        found = _built_timelines(path, version, None, None, step_s, map_version)
        with _WHOLE_LOCK:
            _WHOLE_SPANS[whole_key] = found
            _WHOLE_SPANS.move_to_end(whole_key)
            while len(_WHOLE_SPANS) > 1 and (
                    len(_WHOLE_SPANS) > WHOLE_SPANS_KEPT
                    or sum(tl.estimated_bytes() for tl in _WHOLE_SPANS.values()) > WHOLE_SPANS_MAX_BYTES):
                _WHOLE_SPANS.popitem(last=False)
        return found
    with _WHOLE_LOCK:
        whole = _WHOLE_SPANS.get(whole_key)
    if whole is not None:
        return _cut_timelines(path, version, start_ms, end_ms, step_s, map_version, whole_key[-1])
    return _built_timelines(path, version, start_ms, end_ms, step_s, map_version)


# The whole-span timelines last used (the frames themselves, so a zoom never rebuilds the
# whole span that Streamlit's cache may have dropped): a zoom is cut from them. As many as
# the steps a view offers, within a memory budget (the newest is always kept).
WHOLE_SPANS_KEPT = 8
WHOLE_SPANS_MAX_BYTES = 1 << 30
_WHOLE_SPANS: OrderedDict[tuple[Any, ...], Timelines] = OrderedDict()
_WHOLE_LOCK = threading.Lock()


@st.cache_resource(show_spinner=False, max_entries=16)
def _cut_timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
                   step_s: int, map_version: str, code_version: str) -> Timelines:
    with _WHOLE_LOCK:
        whole = _WHOLE_SPANS.get((path, version, step_s, map_version, code_version))
    if whole is None:  # dropped meanwhile: build the zoom itself
        return _built_timelines(path, version, start_ms, end_ms, step_s, map_version)
    return slice_timelines(whole, step_s, start_ms, end_ms)


# Eight in memory (tens of MB each for three weeks; polars frames are not mutated in place);
# on disk, the library's one result cache, which the CLI reads too.
@persisted("Building timelines (first time for this source, range and step)...", max_entries=8)
def _built_timelines(path: str, version: str, start_ms: int | None, end_ms: int | None,
                     step_s: int, map_version: str) -> Timelines:
    cfg = TimelineConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms)
    with open_store(path) as store:
        return store_timelines(store, cfg, load_workload_map())  # one device pass for all three


# -- what a page draws from a cached result ---------------------------------------------------
MEMO_ENTRIES = 64
_MEMO: OrderedDict[Any, Any] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def memo(key: Any, build: Callable[[], Any]) -> Any:
    """``build()``, made once per ``key`` for every session of this server (the newest
    :data:`MEMO_ENTRIES` kept): a figure or a summary drawn from a cached result.

    A page's elements reach the browser as its run makes them, and the browser draws the page
    again for each burst: a run that stops for a figure's construction between two elements costs
    a new tab one more drawing of everything above (bench/elements.py: thirty KPIs in one burst
    +0.13 s, the same thirty 10 ms apart +0.65 s). ``key`` must name everything the value depends
    on (a query object holds the store's version); the value is shared, so it is never mutated.

    >>> memo(("doc", 1), lambda: [1, 2]) is memo(("doc", 1), lambda: [3])
    True
    """
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    value = build()  # outside the lock: another key's build need not wait (a race builds twice)
    with _MEMO_LOCK:
        _MEMO[key] = value
        while len(_MEMO) > MEMO_ENTRIES:
            _MEMO.popitem(last=False)
    return value
