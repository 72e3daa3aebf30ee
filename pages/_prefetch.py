"""The prefetch: what the other pages will ask for, computed in the background before a click.

After any page has drawn (or stopped early), ``app.py`` calls :func:`prefetch_after_run`: one
low-priority thread per server then computes, for the view the sidebar drew, what the other
pages need (the rhythm, the tail events, the calibration: the same query objects the pages
build, ``pages/_queries.py``), the whole span when the view is a zoom (later zooms are cut from
it), and the timelines at the other analysis steps. A later click finds them cached, or waits
for the one computation already under way (Streamlit holds one compute lock per cached value),
never for a second copy of it.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable

from analytics.config import PREFETCH_ENV, env_setting
from analytics.view import STEP_CHOICES_S, ViewSettings
from pages._caches import cached_timelines, cached_totals, outside_a_run
from pages._queries import CalibrationQuery, EventsQuery, RhythmQuery
from pages._sidebar import take_run_view
from pages._store import DataSource, config_version

_LOG = logging.getLogger(__name__)
# What the analysis pages import beyond the Overview's (statsmodels and scipy behind the
# rhythm: about a second on this machine). Imported in the prefetch, not in the first run's
# script, whose end the browser waits for.
PAGE_MODULES = ("analytics.rhythm", "analytics.rhythm.digest", "analytics.events",
                "analytics.postmortem", "analytics.whatif", "analytics.charts.rhythm",
                "analytics.charts.events", "analytics.charts.whatif")

PREFETCH_MAX_SAMPLES = 60_000_000
THREAD_NAME = "tidelens-prefetch"
# Linux nice of the prefetch thread (and the DuckDB workers it starts): about a third of a
# core's share against a page's run. Not lower: a click that asks for the value the prefetch
# is computing waits for it (Streamlit computes a cached value once), and an unprivileged
# process cannot raise the priority again.
NICE = 5


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
    service is carried across pages (``pages/_sidebar.PAGE_STATE_PREFIXES``), so it always counts.
    A query job's key is ``(name, query)``, the query the page itself builds.
    """
    path, version, mv = src.path, src.version, config_version()
    assert path is not None
    rhythm = RhythmQuery.from_view(v, src, state if page == "rhythm" else {})
    events = EventsQuery.from_view(v, src, state if page == "events" else {})
    svc = state.get("w_svc")

    def calibrate() -> None:  # every service of the pool: the What-if's answer is judged over them all
        services = CalibrationQuery.services(v, src)
        if services:
            CalibrationQuery.pool(v, src, svc if svc in services else None)

    def at_step(s: int) -> Job:
        return Job(("timelines", path, version, v.start_ms, v.end_ms, s, mv),
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
        Job(("rhythm", rhythm), rhythm.run),
        Job(("events", events), events.run),
        *coarser,
        Job(("calibration", path, version, v.start_ms, v.end_ms, v.step_s, mv, svc, v.slos.items()),
            calibrate),
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
        with outside_a_run():  # this thread makes cached calls outside any run, on purpose
            self._loop()

    def _loop(self) -> None:
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


PREFETCH = Prefetcher()


def background_allowed() -> bool:
    """Whether the server computes ahead of a click (``TIDELENS_PREFETCH=0``: only on a click, as the
    AppTests and a busy shared server want it)."""
    return env_setting(PREFETCH_ENV) != "0"


def prefetch_after_run(page: str = "") -> None:
    """Queue the prefetch for the view this run drew (``app.py`` calls it after the page,
    whose url path is ``page``, also when the page stopped early)."""
    found = take_run_view()
    if not background_allowed() or found is None:
        return
    v, src, state = found
    if src.problem or not src.path:
        return
    PREFETCH.submit(prefetch_jobs(v, src, state, page))
