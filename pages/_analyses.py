"""The pages' heavy analytics calls (rhythm, tail events, what-if calibration), cached, and the
prefetch that computes them in the background before a click asks for them.

Not a page. A page calls ``cached_rhythm`` / ``cached_events`` / ``cached_calibration`` with its
widgets' values; the widgets' defaults are the constants here, so what the prefetch computes
is exactly what a page opened with its defaults asks for.

After any page has drawn (or stopped early), ``app.py`` calls :func:`prefetch_after_run`: one
low-priority thread per server then computes, for the view the sidebar drew, what the other
pages need (the rhythm, the tail events, the calibration), the whole span when the view is a
zoom (later zooms are cut from it), and the timelines at the other analysis steps. A later
click finds them cached, or waits for the one computation already under way (Streamlit holds
one compute lock per cached value), never for a second copy of it.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import streamlit as st

from analytics.text import md
from analytics.view import STEP_CHOICES_S, ViewSettings
from pages._common import (TIMELINE_CODE, DataSource, cached_timelines, cached_totals,
                           config_version, load_workload_map, open_store, persisted,
                           take_run_view)

if TYPE_CHECKING:
    from analytics.rhythm.report import RhythmPageData
    from analytics.events import EventsAnalysis

_LOG = logging.getLogger(__name__)
# What the analysis pages import beyond the Overview's (statsmodels and scipy behind the
# rhythm: about a second on this machine). Imported in the prefetch, not in the first run's
# script, whose end the browser waits for.
PAGE_MODULES = ("analytics.rhythm", "analytics.rhythm.report", "analytics.events",
                "analytics.events.report", "analytics.whatif", "analytics.charts.rhythm",
                "analytics.charts.events", "analytics.charts.whatif")

# Widget defaults, shared by the pages and the prefetch.
RHYTHM_RESOLUTIONS_S = (300, 600, 900, 1800, 3600)
RHYTHM_RESOLUTION_S = 600
EVENTS_MIN_DURATION_MIN = 5.0
EVENTS_MERGE_GAP_MIN = 10.0

# Timelines at the other steps are prefetched only for ranges of up to this many samples (the
# sample's 28M take under 3 s a step here; 90 days x 512 GPUs, 362M, take about 50 s a step and
# several GB, work that waits for a user who asks for it).
PREFETCH_MAX_SAMPLES = 60_000_000
PREFETCH_ENV = "TIDELENS_PREFETCH"  # "0" turns the prefetch off (the AppTests do)
THREAD_NAME = "tidelens-prefetch"
# Linux nice of the prefetch thread (and the DuckDB workers it starts): about a third of a
# core's share against a page's run. Not lower: a click that asks for the value the prefetch
# is computing waits for it (Streamlit computes a cached value once), and an unprivileged
# process cannot raise the priority again.
NICE = 5


# -- the heavy calls ------------------------------------------------------------------------
@persisted("Decomposing the rhythm...", *TIMELINE_CODE, "analytics.rhythm", "analytics.sql",
           max_entries=32)
def cached_rhythm(path: str, version: str, signal: str | None, step_s: int, start_ms: int | None,
                  end_ms: int | None, map_version: str, resolution_s: int, tidal_share: float,
                  band_high_q: float, tz: str) -> RhythmPageData:
    from analytics.rhythm import RhythmConfig
    from analytics.rhythm.report import rhythm_page_data

    cfg = RhythmConfig(resolution_s=resolution_s, tidal_share=tidal_share,
                       band_low_q=round(1 - band_high_q, 4), band_high_q=band_high_q, timezone=tz)
    # The timelines every page shares (and their workload map): the rhythm reads the same
    # holdings and traffic as the Overview, and does not build them a second time.
    timelines = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    with open_store(path) as store:
        return rhythm_page_data(store, cfg, signal=signal, step_s=step_s, start_ms=start_ms,
                                end_ms=end_ms, wmap=load_workload_map(), timelines=timelines)


@persisted("Finding and attributing tail events...", *TIMELINE_CODE, "analytics.events", "analytics.sql")
def cached_events(path: str, version: str, start_ms: int | None, end_ms: int | None, step_s: int,
                  map_version: str, slo_items: tuple[tuple[str, float], ...], min_duration_min: float,
                  merge_gap_min: float, incidents_name: str | None,
                  incidents_csv: bytes | None) -> EventsAnalysis:
    from analytics.events import EventsConfig, analyse, load_incidents

    timelines = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    slo = dict(slo_items)
    services = timelines["services"]["service"].unique().to_list()
    cfg = EventsConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms,
                       min_duration_min=min_duration_min, merge_gap_min=merge_gap_min)
    incidents = load_incidents(incidents_name or "upload.csv", incidents_csv) if incidents_csv else None
    return analyse(timelines["services"], timelines["pool"], timelines["holdings"], cfg=cfg,
                   slos_ms={s: slo.get(s, slo.get("*")) for s in services}, incidents=incidents)


# What-if and Chargeback share one calibration per (source, range, step, service, SLO).
@persisted("Calibrating the model on the store (first time for this range)...",
           *TIMELINE_CODE, "analytics.whatif", "analytics.sql")
def cached_calibration(path: str, version: str, start_ms: int | None, end_ms: int | None,
                       step_s: int, map_version: str, service: str | None,
                       slo_ms: float) -> Any:  # analytics.whatif.calibrate.Calibration
    from analytics.whatif.calibrate import calibrate_frames, gpu_model_of

    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    with open_store(path) as store:  # the frames do not carry the GPU model
        gpu_model = gpu_model_of(store)
    return calibrate_frames(tl["services"], tl["pool"], tl["holdings"], service=service,
                            step_s=step_s, slo_for=slo_ms, gpu_model=gpu_model)


@st.cache_data(show_spinner=False, max_entries=4)
def cached_services(path: str, version: str, start_ms: int | None, end_ms: int | None,
                    step_s: int, map_version: str) -> list[str]:
    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    return sorted(tl["services"]["service"].drop_nulls().unique().to_list()) if tl else []


def store_calibration_or_stop(src: DataSource, v: ViewSettings, column: Any, key: str) -> Any:
    """The store's calibration for the service chosen in ``column`` (a selectbox under ``key``);
    with no service to calibrate, or a calibration that fails, an error saying which signal is
    missing and ``st.stop()``: a page never shows a preset's numbers under the store's name."""
    from analytics.errors import TidelensError

    ss = st.session_state
    services = cached_services(src.path, src.version, v.start_ms, v.end_ms, v.step_s, config_version())
    if not services:
        st.error("The store has no inference service with both traffic and latency in this range "
                 "(request-latency histograms and request counts: vLLM, "
                 "http_server_request_duration_seconds), so there is nothing to calibrate. Choose a "
                 "preset above to explore one.", icon=":material/error:")
        st.stop()
    if ss.get(key) not in services:
        ss.pop(key, None)
    name = column.selectbox("Service", services, key=key, help="The inference service the model replays")
    try:
        return cached_calibration(src.path, src.version, v.start_ms, v.end_ms, v.step_s, config_version(),
                                  name, v.slo_for(name))
    except TidelensError as exc:
        st.error(f"The store cannot be calibrated: {md(str(exc).rstrip('. '))}. Choose a preset above to "
                 "explore one.",
                 icon=":material/error:")
        st.stop()


# -- the prefetch ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One cached call to make ahead of a click; ``key`` says what it computes."""

    key: tuple[Any, ...]
    call: Callable[[], Any] = field(compare=False)


def prefetch_jobs(v: ViewSettings, src: DataSource, state: Any, page: str = "") -> list[Job]:
    """What the pages will ask for next, for view ``v``, most likely first.

    ``state`` is the session's state and ``page`` the url path of the page just drawn. The
    Rhythm's and Tail events' own settings count on their own page only: Streamlit drops them
    once another page has run, and the page opens again with its defaults. The What-if
    service is carried across pages (``pages/_common``), so it always counts.
    """
    path, version, mv = src.path, src.version, config_version()
    assert path is not None
    base = (path, version, v.start_ms, v.end_ms)
    own = state if page == "rhythm" else {}
    resolution = int(own.get("rhythm_resolution", RHYTHM_RESOLUTION_S))
    tidal, band = own.get("rhythm_tidal"), own.get("rhythm_band")  # None: the defaults
    signal = own.get("rhythm_signal")
    own = state if page == "events" else {}
    min_dur = float(own.get("ev_min_dur", EVENTS_MIN_DURATION_MIN))
    gap = float(own.get("ev_gap", EVENTS_MERGE_GAP_MIN))
    slo_items = v.slo_items()
    svc = state.get("w_svc")

    def calibrate() -> None:
        services = cached_services(path, version, v.start_ms, v.end_ms, v.step_s, mv)
        if services:
            name = svc if svc in services else services[0]
            cached_calibration(path, version, v.start_ms, v.end_ms, v.step_s, mv, name,
                               v.slo_for(name))

    def rhythm() -> None:
        from analytics.rhythm import RhythmConfig

        cached_rhythm(path, version, signal, v.step_s, v.start_ms, v.end_ms, mv, resolution,
                      float(RhythmConfig.tidal_share if tidal is None else tidal),
                      float(RhythmConfig.band_high_q if band is None else band), v.tz)

    def at_step(s: int) -> Job:
        return Job(("timelines", *base, s, mv),
                   lambda: cached_timelines(path, version, v.start_ms, v.end_ms, s, mv))

    whole_span: list[Job] = []
    if ((v.start_ms is not None or v.end_ms is not None)
            and (cached_totals(path, version).get("samples") or 0) <= PREFETCH_MAX_SAMPLES):
        # A zoom: the whole span at this step, from which every later zoom is cut at once.
        whole_span = [Job(("timelines", path, version, None, None, v.step_s, mv),
                          lambda: cached_timelines(path, version, None, None, v.step_s, mv))]
    coarser: list[Job] = []
    rest: list[Job] = []
    if _samples_in_range(src, v) <= PREFETCH_MAX_SAMPLES:
        # The next coarser step (the likeliest change) before the calibration, the rest after.
        others = [s for s in STEP_CHOICES_S if s != v.step_s]
        following = [s for s in others if s > v.step_s][:1]
        coarser = [at_step(s) for s in following]
        rest = [at_step(s) for s in others if s not in following]
    return [
        Job(("imports",), import_page_modules),
        at_step(v.step_s),
        *whole_span,
        Job(("rhythm", *base, signal, v.step_s, mv, resolution, tidal, band, v.tz), rhythm),
        Job(("events", *base, v.step_s, mv, slo_items, min_dur, gap),
            lambda: cached_events(path, version, v.start_ms, v.end_ms, v.step_s, mv, slo_items,
                                  min_dur, gap, None, None)),
        *coarser,
        Job(("calibration", *base, v.step_s, mv, svc, slo_items), calibrate),
        *rest,
    ]


def import_page_modules() -> None:
    for name in PAGE_MODULES:
        importlib.import_module(name)


def _samples_in_range(src: DataSource, v: ViewSettings) -> float:
    """The store's samples in the view's range, taking them as spread evenly over its span."""
    totals = cached_totals(src.path, src.version)
    first, last, samples = totals.get("first_ts_ms"), totals.get("last_ts_ms"), totals.get("samples")
    if first is None or last is None or not samples or last <= first:
        return 0.0
    start, end = v.clamp_range(first, last)
    return samples * max(end - start, 0) / (last - first)


class Prefetcher:
    """One background thread per server that runs the latest view's jobs, one at a time.

    A newer view replaces the jobs not yet started. Finished keys are remembered (bounded),
    so a rerun of the same view queues nothing. The thread runs at a lower CPU priority
    (Linux nice :data:`NICE`, inherited by the DuckDB workers it starts), after ``delay_s`` of quiet,
    so the page on screen is drawn first and a user's own run is not slowed. Each new view
    submitted restarts the quiet time.
    """

    def __init__(self, delay_s: float = 1.0, remember: int = 256) -> None:
        self.delay_s = delay_s
        self._remember = remember
        self._cv = threading.Condition()
        self._pending: list[Job] = []
        self._done: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._busy = False
        self._submitted_at = 0.0
        self._thread: threading.Thread | None = None
        self.failures: deque[tuple[tuple[Any, ...], str]] = deque(maxlen=50)

    def submit(self, jobs: list[Job]) -> None:
        with self._cv:
            self._submitted_at = time.monotonic()
            self._pending = [j for j in jobs if j.key not in self._done]
            if not self._pending:
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until every submitted job has run; ``False`` on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._busy, timeout_s)

    def _run(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except (AttributeError, OSError):
            pass  # not Linux: the same work at normal priority
        while True:
            with self._cv:
                while True:
                    if not self._pending:
                        self._busy = False
                        self._cv.notify_all()
                        self._cv.wait()
                        continue
                    # Quiet first: the browser draws the run just submitted, and a burst of
                    # reruns (a dragged slider) replaces the jobs before any starts.
                    quiet_s = self._submitted_at + self.delay_s - time.monotonic()
                    if quiet_s <= 0:
                        break
                    self._cv.wait(quiet_s)
                job = self._pending.pop(0)
                self._busy = True
            t0 = time.perf_counter()
            try:
                job.call()
            except Exception as exc:  # noqa: BLE001 - the page will show the same error itself
                # Not remembered as done: a store busy with a writer now may be free next time.
                self.failures.append((job.key, f"{type(exc).__name__}: {exc}"))
                _LOG.info("prefetch of %s failed: %s", job.key[0], exc)
                continue
            _LOG.debug("prefetched %s in %.2f s", job.key[0], time.perf_counter() - t0)
            with self._cv:
                self._done[job.key] = None
                while len(self._done) > self._remember:
                    self._done.popitem(last=False)


class _NoContextWarning(logging.Filter):
    """Drop Streamlit's "missing ScriptRunContext" warning for the prefetch thread: it makes
    cached calls outside any script run on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD_NAME


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
    _NoContextWarning())
PREFETCH = Prefetcher()


def prefetch_after_run(page: str = "") -> None:
    """Queue the prefetch for the view this run drew (``app.py`` calls it after the page,
    whose url path is ``page``, also when the page stopped early)."""
    found = take_run_view()
    if os.environ.get(PREFETCH_ENV, "1") == "0" or found is None:
        return
    v, src, state = found
    if src.problem or not src.path:
        return
    PREFETCH.submit(prefetch_jobs(v, src, state, page))
