"""The capacity review built from the store's timelines (:func:`build_review`, :func:`review_store`):
each part from the function the pages use for it, a part the data cannot support recorded as
missing with the reason (:mod:`analytics.review.sections` holds and writes the result)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from analytics.change.basis import kueue_signals
from analytics.change.findings import review_change
from analytics.errors import TidelensError
from analytics.events import EventsConfig
from analytics.events.pipeline import analyse_timelines
from analytics.forecast.horizon import ForecastConfig
from analytics.forecast.outlook import ForecastAnswer, forecast_timelines, latest_change
from analytics.overview import summarise
from analytics.rhythm import RhythmConfig
from analytics.rhythm.digest import rhythm_page_data
from analytics.slo import SloTable, resolve_slos
from analytics.timeline import Timelines, store_timelines
from analytics.times import format_span
from analytics.whatif import POLICIES, compare
from analytics.whatif.agree import pool_agreement
from analytics.whatif.answer import answer_for, calibrate_pool
from analytics.whatif.calibrate import calibrate_timelines
from analytics.whatif.form import MODEL_DAYS

if TYPE_CHECKING:
    from analytics.change.comparison import ChangeComparison
    from analytics.events import EventsAnalysis
    from analytics.rhythm.digest import RhythmPageData
    from analytics.store import Store
    from analytics.whatif.calibrate import Calibration
    from analytics.workloads import WorkloadMap

from analytics.review.sections import STAGES, Review


def _attempt(part: str, missing: dict[str, str], make: Callable[[], Any]) -> Any:
    """``make()``, or ``None`` with the reason recorded when the data cannot support it."""
    try:
        return make()
    except TidelensError as exc:
        missing[part] = str(exc)
        return None


# -- building -----------------------------------------------------------------------------------
def build_review(timelines: Timelines, *, step_s: int, slos: SloTable,
                 tz: str = "UTC", label: str = "", span: str = "",
                 events: Callable[[], "EventsAnalysis"] | None = None,
                 rhythm: Callable[[], "RhythmPageData"] | None = None,
                 calibration: Callable[[str], "Calibration"] | None = None,
                 map_digest: str = "",
                 change: Callable[["EventsAnalysis | None"], "ChangeComparison | None"] | None = None,
                 forecast: Callable[[], ForecastAnswer] | None = None,
                 on_stage: Callable[[str], None] = lambda _words: None) -> Review:
    """The review of one range from its timelines and the analyses' calls.

    ``slos``: every service's SLO (the view's, or ``resolve_slos``'s). ``events``,
    ``rhythm`` and ``calibration`` are the callers' own (cached) calls, made here; one that
    raises a :class:`TidelensError` leaves its section saying why. The what-if calibrates every
    service of the pool (``calibration`` per service) and says the pool's answer
    (:func:`analytics.whatif.answer.answer_for`); the service
    :func:`analytics.whatif.observe.pick_service` picks (the one most often above its SLO) is
    the breakdown shown beside it. ``on_stage`` hears each part's name as it starts (the page's
    status, the CLI's progress line: a review takes seconds on a cold server).
    """

    summary = summarise(timelines.pool, timelines.holdings, timelines.services, slos, step_s)
    services = timelines.service_names()
    review = Review(label=label, span=span, step_s=step_s, tz=tz, summary=summary,
                    slo_ms=slos.for_services(services), map_digest=map_digest)
    missing = review.missing
    if events is not None:
        on_stage(STAGES["events"])
        review.events = _attempt("tail events", missing, events)
    if rhythm is not None:
        on_stage(STAGES["rhythm"])
        review.rhythm = _attempt("rhythm", missing, rhythm)
    if calibration is not None and services:
        on_stage(STAGES["calibration"])
        pool = _attempt("what-if", missing, lambda: calibrate_pool(timelines.services, slos, calibration))
        if pool is not None:
            for name, why in pool.not_modelled.items():
                missing[f"what-if, {name}"] = why
            review.calibration = pool.calibrations[pool.picked]
            review.backtests = {n: {k: v for k, v in c.backtest.items() if k != "frame"}
                                for n, c in pool.calibrations.items()}
            on_stage(STAGES["policies"])
            review.answer = answer_for(pool, days=MODEL_DAYS, policies=POLICIES,
                                       replay=lambda s: compare(s, POLICIES))
            # The breakdown's scenario goes with its results: the typical day and the bills read
            # its steps (the calibration's is the whole range, longer than the model's).
            mine = next(r for r in review.answer.replays if r.service == pool.picked)
            review.scenario, review.results = mine.scenario, dict(mine.results)
            review.best_policy = review.answer.best_policy
            if review.events is not None:
                review.agreement = pool_agreement(review.events, review.answer)
    elif calibration is not None:
        missing["what-if"] = ("no inference service with traffic and latency in this range: "
                              "nothing to calibrate")
    if change is not None:  # before/after a recorded change, its events the review's own
        on_stage(STAGES["change"])
        review.change = _attempt("before and after the change", missing, lambda: change(review.events))
    if forecast is not None and services:
        on_stage(STAGES["forecast"])
        review.forecast = _attempt("forecast", missing, forecast)
    return review


def review_store(store: "Store", *, step_s: int = 60, start_ms: int | None = None,
                 end_ms: int | None = None, slos: SloTable | None = None,
                 wmap: "WorkloadMap | None" = None, tz: str = "UTC",
                 on_stage: Callable[[str], None] = lambda _words: None) -> Review:
    """The review of a store's range, computed as ``tidelens events``/``whatif``/``rhythm`` do;
    ``on_stage`` as :func:`build_review`'s."""

    cfg = EventsConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms)
    on_stage(STAGES["timelines"])
    tl = store_timelines(store, cfg.timeline_config(), wmap)
    table = slos if slos is not None else resolve_slos(store)
    totals = store.totals()
    first, last = totals.get("first_ts_ms"), totals.get("last_ts_ms")
    span = format_span(start_ms if start_ms is not None else first,
                       end_ms if end_ms is not None else last, tz) if first is not None else ""
    return build_review(
        tl, step_s=step_s, slos=table, tz=tz, label=str(store.path), span=span,
        map_digest=tl.facts.map_digest,
        events=lambda: analyse_timelines(tl, cfg, slos=table),
        rhythm=lambda: rhythm_page_data(store, RhythmConfig(timezone=tz), step_s=step_s,
                                        start_ms=start_ms, end_ms=end_ms, wmap=wmap, timelines=tl),
        calibration=lambda name: calibrate_timelines(tl, service=name, step_s=step_s, slos=table),
        change=lambda evs: review_change(store, step_s=step_s, slos=table, start_ms=start_ms,
                                         end_ms=end_ms, wmap=wmap, events=evs),
        forecast=lambda: forecast_timelines(tl, slos=table, cfg=ForecastConfig(step_s=step_s),
                                            kueue=kueue_signals(store), change=latest_change(store, end_ms)),
        on_stage=on_stage)
