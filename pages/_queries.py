"""The analysis pages' questions as query objects, and the cached heavy calls that answer them.

One query object per analysis page (:class:`RhythmQuery`, :class:`EventsQuery`,
:class:`CalibrationQuery`, :class:`ForecastQuery`): keyword-only, built by ``from_view`` from the view settings and the
page's widget values, with the analysis config's own defaults for a widget not drawn. The
page and the background prefetch (``pages/_prefetch.py``) build the same object for the same
view, so what the prefetch computes is exactly what the page asks for; ``run()`` makes the
cached call (memory and disk, :func:`pages._caches.persisted`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Hashable, Mapping

import streamlit as st

from analytics.change.basis import kueue_signals
from analytics.errors import TidelensError
from analytics.events import load_incidents
from analytics.events.config import EventsConfig
from analytics.events.pipeline import analyse_timelines
from analytics.forecast.outlook import ForecastAnswer, forecast_timelines, latest_change
from analytics.forecast.horizon import ForecastConfig
from analytics.review import STAGES, build_review, review_html
from analytics.rhythm.config import RhythmConfig
from analytics.rhythm.digest import rhythm_page_data
from analytics.slo import SloTable
from analytics.text import md
from analytics.times import format_span
from analytics.view import ViewSettings
from analytics.whatif.answer import PoolAnswer, PoolCalibration, answer_for, calibrate_pool, scenario_answer
from analytics.whatif.calibrate import calibrate_timelines
from analytics.whatif.outputs import compare
from analytics.whatif.transforms import Transforms
from analytics.whatif.observe import pick_service
from pages._caches import cached_timelines, cached_totals, memo, outside_a_run, persisted
from pages._change import change_for_review
from pages._show import choose, with_status
from pages._store import DataSource, config_version, load_workload_map, open_store

if TYPE_CHECKING:
    from analytics.events import EventsAnalysis
    from analytics.rhythm.digest import RhythmPageData

# The decomposition steps the Rhythm page offers (each divides a day).
RHYTHM_RESOLUTIONS_S = (300, 600, 900, 1800, 3600)
SERVICES_INLINE = 6  # more services than this scroll in a box


@dataclass(frozen=True, kw_only=True)
class ViewQuery:
    """What every page's question starts from: the store, its version, the range, the step and
    the workload map's version (each a cache key)."""

    path: str
    version: str
    start_ms: int | None
    end_ms: int | None
    step_s: int
    map_version: str

    @staticmethod
    def on_view(v: ViewSettings, src: DataSource) -> dict[str, Any]:
        assert src.path is not None
        return {"path": src.path, "version": src.version, "start_ms": v.start_ms, "end_ms": v.end_ms,
                "step_s": v.step_s, "map_version": config_version()}


@dataclass(frozen=True, kw_only=True)
class RhythmQuery(ViewQuery):
    """The Rhythm page's question: one signal's rhythm for a view (``signal=None``: the page's
    first signal)."""

    tz: str
    signal: str | None = None
    resolution_s: int = RhythmConfig.resolution_s
    tidal_share: float = RhythmConfig.tidal_share
    band_high_q: float = RhythmConfig.band_high_q

    @classmethod
    def from_view(cls, v: ViewSettings, src: DataSource, state: Mapping[str, Any]) -> "RhythmQuery":
        """``state`` holds the page's widget values (``rhythm_*``); missing ones are defaults."""
        return cls(**cls.on_view(v, src), tz=v.tz,
                   signal=state.get("rhythm_signal"),
                   resolution_s=int(state.get("rhythm_resolution", cls.resolution_s)),
                   tidal_share=float(state.get("rhythm_tidal", cls.tidal_share)),
                   band_high_q=float(state.get("rhythm_band", cls.band_high_q)))

    def run(self) -> "RhythmPageData":
        return cached_rhythm(self.path, self.version, self.signal, self.step_s, self.start_ms,
                             self.end_ms, self.map_version, self.resolution_s, self.tidal_share,
                             self.band_high_q, self.tz)


@dataclass(frozen=True, kw_only=True)
class EventsQuery(ViewQuery):
    """The Tail events page's question: every tail event of a view, with the page's detection
    rule and (optionally) an uploaded incident record."""

    slos: SloTable
    min_duration_min: float = EventsConfig.min_duration_min
    merge_gap_min: float = EventsConfig.merge_gap_min
    incidents_name: str | None = None
    incidents_csv: bytes | None = None

    @classmethod
    def from_view(cls, v: ViewSettings, src: DataSource, state: Mapping[str, Any], *,
                  incidents: tuple[str, bytes] | None = None) -> "EventsQuery":
        """``state`` holds the page's widget values (``ev_*``); ``incidents`` an uploaded file's
        name and bytes."""
        return cls(**cls.on_view(v, src), slos=v.slos,
                   min_duration_min=float(state.get("ev_min_dur", cls.min_duration_min)),
                   merge_gap_min=float(state.get("ev_gap", cls.merge_gap_min)),
                   incidents_name=incidents[0] if incidents is not None else None,
                   incidents_csv=incidents[1] if incidents is not None else None)

    def run(self) -> "EventsAnalysis":
        return cached_events(self.path, self.version, self.start_ms, self.end_ms, self.step_s,
                             self.map_version, self.slos, self.min_duration_min,
                             self.merge_gap_min, self.incidents_name, self.incidents_csv)


@dataclass(frozen=True, kw_only=True)
class CalibrationQuery(ViewQuery):
    """What-if and Chargeback's question: the model calibrated on one service of a view."""

    service: str
    slos: SloTable

    @classmethod
    def from_view(cls, v: ViewSettings, src: DataSource, service: str) -> "CalibrationQuery":
        return cls(**cls.on_view(v, src), service=service, slos=v.slos)

    @staticmethod
    def services(v: ViewSettings, src: DataSource) -> list[str]:
        """The services of a view that could be calibrated (those with a timeline)."""
        assert src.path is not None
        return cached_services(src.path, src.version, v.start_ms, v.end_ms, v.step_s,
                               config_version())

    def first_time(self) -> bool:
        """Whether this process has not made (or loaded) this calibration yet: seconds to wait."""
        return self not in _CALIBRATED

    def run(self, on_stage: Callable[[str], None] | None = None) -> Any:  # analytics.whatif.calibrate.Calibration
        """The calibration, its stages said to ``on_stage`` when it is made."""
        _HEARD.say = on_stage
        try:
            cal = cached_calibration(self.path, self.version, self.start_ms, self.end_ms,
                                     self.step_s, self.map_version, self.service, self.slos)
        finally:
            _HEARD.say = None
        _CALIBRATED.add(self)
        return cal


    @staticmethod
    def pool(v: ViewSettings, src: DataSource, service: str | None = None,
             on_stage: Callable[[str], None] | None = None) -> PoolCalibration:
        """Every service of ``service``'s pool (default: the pool of the service most often
        above its SLO) calibrated, each its own cached call (:meth:`run`): what the pool's answer
        is judged over; each service's stages said to ``on_stage`` (after its name)."""
        assert src.path is not None
        tl = cached_timelines(src.path, src.version, v.start_ms, v.end_ms, v.step_s, config_version())

        def run(name: str) -> Any:
            said = None if on_stage is None else (lambda words: on_stage(f"{name}, {words}"))
            return CalibrationQuery.from_view(v, src, name).run(said)

        return calibrate_pool(tl.services, v.slos, run, service=service)

    @staticmethod
    def picked(v: ViewSettings, src: DataSource) -> str | None:
        """The service shown first as the breakdown: the one most often above its SLO."""
        assert src.path is not None
        return cached_picked_service(src.path, src.version, v.start_ms, v.end_ms, v.step_s,
                                     config_version(), v.slos)


# Who hears a calibration's stages in this thread (a cached call takes no callable: its
# arguments are its key), and the calibrations this process has made or loaded.
_HEARD = threading.local()
_CALIBRATED: set[CalibrationQuery] = set()


def _say_stage(words: str) -> None:
    say = getattr(_HEARD, "say", None)
    if say is not None:
        say(words)


@dataclass(frozen=True, kw_only=True)
class ForecastQuery(ViewQuery):
    """The Forecast page's question: the collisions ahead of the view's end, and (``backtest``)
    the forecast scored on the view's days, its ranges calibrated on them."""

    slos: SloTable
    horizon_h: float = ForecastConfig.horizon_h
    backtest: bool = False

    @classmethod
    def from_view(cls, v: ViewSettings, src: DataSource, *, backtest: bool = False) -> "ForecastQuery":
        return cls(**cls.on_view(v, src), slos=v.slos, backtest=backtest)

    def run(self) -> ForecastAnswer:
        return cached_forecast(self.path, self.version, self.start_ms, self.end_ms, self.step_s,
                               self.map_version, self.slos, self.horizon_h, self.backtest)


# -- the heavy calls ------------------------------------------------------------------------
@persisted("Decomposing the rhythm...", max_entries=32)
def cached_rhythm(path: str, version: str, signal: str | None, step_s: int, start_ms: int | None,
                  end_ms: int | None, map_version: str, resolution_s: int, tidal_share: float,
                  band_high_q: float, tz: str) -> "RhythmPageData":

    cfg = RhythmConfig(resolution_s=resolution_s, tidal_share=tidal_share,
                       band_low_q=round(1 - band_high_q, 4), band_high_q=band_high_q, timezone=tz)
    # The timelines every page shares (and their workload map): the rhythm reads the same
    # holdings and traffic as the Overview, and does not build them a second time.
    timelines = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    with open_store(path) as store:
        return rhythm_page_data(store, cfg, signal=signal, step_s=step_s, start_ms=start_ms,
                                end_ms=end_ms, wmap=load_workload_map(), timelines=timelines)


@persisted("Finding and attributing tail events...")
def cached_events(path: str, version: str, start_ms: int | None, end_ms: int | None, step_s: int,
                  map_version: str, slos: SloTable, min_duration_min: float,
                  merge_gap_min: float, incidents_name: str | None,
                  incidents_csv: bytes | None) -> "EventsAnalysis":

    timelines = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    cfg = EventsConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms,
                       min_duration_min=min_duration_min, merge_gap_min=merge_gap_min)
    incidents = load_incidents(incidents_name or "upload.csv", incidents_csv) if incidents_csv else None
    # The same call as the CLI's analyse_store; the notes come from the timelines' facts.
    return analyse_timelines(timelines, cfg, incidents, slos=slos)


@persisted("Forecasting the collisions ahead...", max_entries=8)
def cached_forecast(path: str, version: str, start_ms: int | None, end_ms: int | None, step_s: int,
                    map_version: str, slos: SloTable, horizon_h: float, backtest: bool) -> ForecastAnswer:
    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    with open_store(path) as store:
        kueue, change = kueue_signals(store), latest_change(store, end_ms)
    return forecast_timelines(tl, slos=slos, cfg=ForecastConfig(horizon_h=horizon_h, step_s=step_s), kueue=kueue,
                              change=change, with_backtest=backtest)


# What-if and Chargeback share one calibration per (source, range, step, service, SLO).
# Its stages in the page's status (store_calibration_or_stop), not a spinner.
@persisted(False)
def cached_calibration(path: str, version: str, start_ms: int | None, end_ms: int | None,
                       step_s: int, map_version: str, service: str | None,
                       slos: SloTable) -> Any:  # analytics.whatif.calibrate.Calibration

    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    return calibrate_timelines(tl, service=service, step_s=step_s, slos=slos, on_stage=_say_stage)


@st.cache_data(show_spinner=False, max_entries=4)
def cached_services(path: str, version: str, start_ms: int | None, end_ms: int | None,
                    step_s: int, map_version: str) -> list[str]:
    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    return tl.service_names()


@st.cache_data(show_spinner=False, max_entries=4)
def cached_picked_service(path: str, version: str, start_ms: int | None, end_ms: int | None,
                          step_s: int, map_version: str, slos: SloTable) -> str | None:
    tl = cached_timelines(path, version, start_ms, end_ms, step_s, map_version)
    return pick_service(tl.services, slos) if tl.service_names() else None


def store_pool_or_stop(src: DataSource, v: ViewSettings, column: Any, key: str) -> tuple[Any, PoolCalibration]:
    """The store's pool, every service calibrated (:meth:`CalibrationQuery.pool`: the pool's
    answer is judged over them all), and the calibration of the service chosen in ``column`` (a
    radio under ``key``: the breakdown shown beside the answer, by default the service most
    often above its SLO); with no service to calibrate, or a chosen service whose calibration
    fails, an error saying which signal is missing and ``st.stop()``: a page never shows a
    preset's numbers under the store's name."""

    services = CalibrationQuery.services(v, src)
    if not services:
        st.error("The store has no inference service with both traffic and latency in this range "
                 "(request-latency histograms and request counts: vLLM, "
                 "http_server_request_duration_seconds), so there is nothing to calibrate. Choose a "
                 "preset above to explore one.", icon=":material/error:")
        st.stop()
    # A radio, never a selectbox: a page's first render affords none (pages/_show.choose); many
    # services scroll in a box.
    name = choose("Breakdown: service", services, key=key, where=column, widget="radio",
                  height=None if len(services) <= SERVICES_INLINE else 160,
                  default=CalibrationQuery.picked(v, src),
                  help="The pool's answer is judged over every service on it, each against its own SLO; "
                       "this picks the service whose backtest, tables and charts are shown beside it")
    try:
        if CalibrationQuery.from_view(v, src, name).first_time():  # seconds on a cold server: its stage shown
            pool = with_status("Calibrating the model on the pool's services (first time for this range)",
                               lambda stage: CalibrationQuery.pool(v, src, name, stage))
        else:
            pool = CalibrationQuery.pool(v, src, name)
        return pool.calibrations[name], pool
    except TidelensError as exc:
        st.error(f"The store cannot be calibrated: {md(str(exc).rstrip('. '))}. Choose a preset above to "
                 "explore one.",
                 icon=":material/error:")
        st.stop()


def pool_answer_for(v: ViewSettings, src: DataSource, pool: PoolCalibration | None, scn: Any,
                    results: Any, *, days: int, policies: tuple[str, ...], transforms: Transforms) -> PoolAnswer:
    """The answer the What-if page and Chargeback open on, made once per view and scenario for
    every session (:func:`pages._caches.memo`): over every service of the store's ``pool`` (each
    replay cached by its scenario, ``scn`` and its ``results`` standing for the edited service),
    or ``scn`` alone for a preset or a file (``pool`` None)."""
    if pool is None:
        return scenario_answer(scn, results)

    def replay(s: Any) -> Any:
        return memo(("compare", s.fingerprint(), policies), lambda: compare(s, policies))

    return memo(("answer", src.path, src.version, config_version(), v.start_ms, v.end_ms, v.step_s, v.slos,
                 days, scn.fingerprint(), policies, transforms),
                lambda: answer_for(pool, days=days, policies=policies, edited=scn.modelled_service(),
                                   scenario=scn, transforms=transforms, replay=replay))


def review_for(v: ViewSettings, src: DataSource,
               on_stage: Callable[[str], None] = lambda _words: None) -> Any:  # analytics.review.Review
    """The capacity review of a view, from the same cached calls the pages make (the Rhythm,
    Tail events and What-if pages with their defaults), so the report repeats their numbers;
    ``on_stage`` hears each part's name as it starts (:data:`analytics.review.STAGES`)."""

    assert src.path is not None
    on_stage(STAGES["timelines"])
    tl = cached_timelines(src.path, src.version, v.start_ms, v.end_ms, v.step_s, config_version())
    totals = cached_totals(src.path, src.version)
    first, last = totals.get("first_ts_ms"), totals.get("last_ts_ms")
    span = "" if first is None or last is None else format_span(*v.clamp_range(first, last), v.tz)
    return build_review(
        tl, step_s=v.step_s, slos=v.slos, tz=v.tz, label=src.label, span=span,
        events=EventsQuery.from_view(v, src, {}).run, rhythm=RhythmQuery.from_view(v, src, {}).run,
        calibration=lambda name: CalibrationQuery.from_view(v, src, name).run(),
        map_digest=tl.facts.map_digest,  # the map the timelines were classed with
        change=lambda _events: change_for_review(v, src),
        forecast=ForecastQuery.from_view(v, src).run,  # the Forecast page's, without its backtest
        on_stage=on_stage)


def review_html_for(v: ViewSettings, src: DataSource, on_stage: Callable[[str], None] = lambda _words: None) -> str:
    """:func:`review_for` as the self-contained HTML file, its stages (drawing the report the
    last) said to ``on_stage``."""

    review = review_for(v, src, on_stage)
    on_stage(STAGES["render"])
    return review_html(review)


# -- work a page shows when it is ready -----------------------------------------------------
# One worker for a page's slow extras (the What-if's "next GPUs" sweep): a slider answers at
# once, and the extra is drawn when it is done. It starts after a moment of quiet, so it never
# competes with the run that asked for it, and per slot only the newest request runs: a dragged
# slider does not compute a sweep per position.
_BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidelens-background")
_JOBS: OrderedDict[Hashable, Future] = OrderedDict()
_NEWEST: dict[str, Hashable] = {}
_JOBS_LOCK = threading.Lock()
JOBS_KEPT = 32
QUIET_S = 0.4


class Superseded(Exception):
    """A background job a newer request of its slot replaced before it started."""


def in_background(slot: str, key: Hashable, fn: Callable[[], Any]) -> Future:
    """The job computing ``fn()`` for ``key``: the one already started or done, else a new one
    (and ``slot``'s older request, if it has not started yet, never will)."""
    with _JOBS_LOCK:
        _NEWEST[slot] = key
        job = _JOBS.get(key)
        if job is not None and not (job.done() and isinstance(job.exception(), Superseded)):
            _JOBS.move_to_end(key)
            return job

        def run() -> Any:
            time.sleep(QUIET_S)  # the run that asked draws first
            with _JOBS_LOCK:
                if _NEWEST.get(slot) != key:
                    raise Superseded(key)
            with outside_a_run():
                return fn()

        job = _BACKGROUND.submit(run)
        _JOBS[key] = job
        while len(_JOBS) > JOBS_KEPT:
            _JOBS.popitem(last=False)
        return job


@st.fragment(run_every=0.5)
def rerun_when_done(job: Future, message: str) -> None:
    """A caption while ``job`` runs; the page runs again (and draws its result) once it is done."""
    if job.done():
        st.rerun()
    st.caption(message)
