"""The capacity review as a report: its numbers (:class:`Review`, :class:`ReviewNumbers`) and its
sections in reading order (a finding, its numbers, its chart), written as one document
(:func:`review_document`), self-contained HTML (:func:`review_html`) or a file (:func:`write_review`) by
the one report renderer (:mod:`analytics.document`). :mod:`analytics.review.build` computes a review."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analytics.change.findings import change_section
from analytics.charts.overview import pool_story_figure
from analytics.charts.rhythm import hour_of_week_figure
from analytics.charts.whatif import bills_figure, typical_day_figure
from analytics.document import Document, Section, render_html, write_document
from analytics.forecast.action import Action
from analytics.forecast.drawn import forecast_section
from analytics.forecast.horizon import DayForecast
from analytics.forecast.outlook import ForecastAnswer
from analytics.measures import over_slo_label
from analytics.overview import pool_headline, thin_for_display
from analytics.rhythm.summary import rhythm_headline
from analytics.text import escape_figure
from analytics.times import format_time, iso_utc
from analytics.units import hour_text, hour_window_text
from analytics.whatif.agree import Agreement
from analytics.whatif.answer import PoolAnswer, in_words
from analytics.whatif.ledger import bills, typical_day
from analytics.whatif.outputs import PolicySummary

if TYPE_CHECKING:
    from analytics.change.comparison import ChangeComparison
    from analytics.events import EventsAnalysis
    from analytics.overview import OverviewSummary
    from analytics.rhythm.digest import RhythmPageData
    from analytics.whatif.calibrate import Calibration
    from analytics.whatif.params import PoolScenario

# A review section is the one renderer's section (a finding, paragraphs, tables, a figure).
ReviewSection = Section
# What a review is doing, stage by stage, in the words its status line shows.
STAGES = {"timelines": "reading the pool and the services", "events": "finding the tail events",
          "rhythm": "decomposing the rhythm", "calibration": "calibrating the what-if on the store",
          "policies": "replaying the pool policies", "change": "comparing before and after the change",
          "forecast": "forecasting the nights ahead", "render": "drawing the report"}


@dataclass(frozen=True)
class EventCounts:
    """The tail events of the range, counted (the review's JSON)."""

    count: int
    misattributed: int
    by_cause: dict[str, int]
    ids: list[str]


@dataclass(frozen=True)
class WhatifNumbers:
    """The what-if of the review: the pool's answer (``best_policy`` and ``pool``: every service
    of the pool, each against its own SLO) and the tail events' agreement with it, beside one
    service's breakdown (``service``: the one most often above its SLO, its backtest and each
    policy's summary)."""

    service: str
    backtest: dict[str, Any]  # analytics.whatif.backtest.backtest_from's, without the frame
    pool_gpus: int
    policies: dict[str, PolicySummary]
    best_policy: str | None
    agreement: Agreement | None = None
    pool: PoolAnswer | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"service": self.service, "backtest": self.backtest, "pool_gpus": self.pool_gpus,
               "policies": {n: s.as_dict() for n, s in self.policies.items()}, "best_policy": self.best_policy}
        if self.agreement is not None:
            out["agreement"] = self.agreement.as_dict()
        if self.pool is not None:
            out["pool"] = self.pool.as_dict()
        return out


@dataclass(frozen=True)
class ForecastNumbers:
    """The review's forecast: when it was made (the range's end), its first whole day ahead and
    the changes tonight tried against that day's collisions (:mod:`analytics.forecast`)."""

    at_ms: int
    next_day: DayForecast | None
    actions: list[Action]

    def as_dict(self) -> dict[str, Any]:
        return {"at": iso_utc(self.at_ms), "next_day": self.next_day.as_json() if self.next_day else None,
                "actions": [a.as_json() for a in self.actions]}


@dataclass(frozen=True)
class ReviewNumbers:
    """The report's numbers (``tidelens review --json`` prints :meth:`as_dict`), each from the
    analysis that computed it: the overview's KPIs, the events' counts, the what-if's summaries,
    the change's comparison."""

    store: str
    range: str
    step_s: int
    pool_gpus: float
    gpu_hours: dict[str, float]  # capacity, then each class
    allocation_pct: float | None
    activity_pct: float | None
    minutes_over_slo: dict[str, float]  # any_service, then each service
    slo_ms: dict[str, float | None]  # the SLO each service was judged by
    missing: dict[str, str]
    map_digest: str
    events: EventCounts | None = None
    whatif: WhatifNumbers | None = None
    change: "ChangeComparison | None" = None
    forecast: "ForecastNumbers | None" = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "store": self.store, "range": self.range, "step_s": self.step_s, "pool_gpus": self.pool_gpus,
            "gpu_hours": self.gpu_hours, "allocation_pct": self.allocation_pct, "activity_pct": self.activity_pct,
            "minutes_over_slo": self.minutes_over_slo, "slo_ms": self.slo_ms, "missing": self.missing,
            "map_digest": self.map_digest}
        if self.events is not None:
            out["events"] = asdict(self.events)
        if self.whatif is not None:
            out["whatif"] = self.whatif.as_dict()
        if self.change is not None:
            out["change"] = self.change.as_dict()
        if self.forecast is not None:
            out["forecast"] = self.forecast.as_dict()
        return out


@dataclass
class Review:
    """What the report says, assembled once from the analyses' results (:func:`build_review`);
    ``numbers()`` is ``tidelens review --json``."""

    label: str
    span: str
    step_s: int
    tz: str
    summary: "OverviewSummary"
    slo_ms: dict[str, float | None]  # the SLO each service was judged by
    events: "EventsAnalysis | None" = None
    rhythm: "RhythmPageData | None" = None
    calibration: "Calibration | None" = None  # the breakdown's service (the one most often over its SLO)
    results: dict[str, Any] = field(default_factory=dict)  # policy -> PolicyResult of that service (modelled)
    scenario: "PoolScenario | None" = None  # what ``results`` replayed (the range's last days)
    # The pool's default answer: every service of the pool replayed, judged by the one rule
    # (analytics.whatif.answer; the What-if page's, Chargeback's and `tidelens whatif`'s).
    answer: PoolAnswer | None = None
    backtests: dict[str, dict[str, Any]] = field(default_factory=dict)  # each service's, without the frame
    missing: dict[str, str] = field(default_factory=dict)  # part -> why it is not shown
    map_digest: str = ""  # the workload map it was computed with (analytics.workloads.map_digest)
    change: "ChangeComparison | None" = None  # before/after the latest recorded change (analytics.change)
    forecast: ForecastAnswer | None = None  # the collisions ahead of the range's end (analytics.forecast)
    best_policy: str | None = None  # the pool's (analytics.measures.best_policy), as the pages name it
    # Tail events' batch-contention minutes beside what partitioning removes, over the days the
    # what-if replays, the pool's services together (analytics.whatif.agree.pool_agreement: the
    # What-if page's and Chargeback's sentence).
    agreement: Agreement | None = None

    def document(self) -> Document:
        """The review as the one renderer's document (:func:`review_document`): its figures are
        ``.document().figures()``."""
        return review_document(self)

    def _repr_html_(self) -> str:
        """The review in a notebook cell: the report's text and tables, figures named by index."""
        return self.document()._repr_html_()

    def numbers(self) -> ReviewNumbers:
        """The report's numbers (the CLI's ``--json`` is their ``as_dict()``)."""
        s = self.summary
        events = whatif = None
        if self.events is not None:
            evs = self.events.events
            events = EventCounts(count=len(evs), misattributed=sum(e.misattributed for e in evs),
                                 by_cause=_count(e.cause for e in evs), ids=[e.id for e in evs])
        if self.calibration is not None:
            whatif = WhatifNumbers(
                service=self.calibration.observation.service,
                backtest={k: v for k, v in self.calibration.backtest.items() if k != "frame"},
                pool_gpus=self.calibration.scenario.pool.gpus,
                policies={n: r.summary for n, r in self.results.items()}, best_policy=self.best_policy,
                agreement=self.agreement, pool=self.answer)
        forecast = None
        if self.forecast is not None:
            fc = self.forecast.forecast
            forecast = ForecastNumbers(at_ms=fc.at_ms, next_day=fc.next_day(), actions=list(fc.actions))
        return ReviewNumbers(
            store=self.label, range=self.span, step_s=self.step_s, pool_gpus=s.pool_gpus_max,
            gpu_hours={"capacity": round(s.gpu_hours, 1),
                       **{c: round(g, 1) for c, g in s.class_share.select("cls", "gpu_hours").iter_rows()}},
            allocation_pct=s.allocation_pct, activity_pct=s.activity_pct,
            minutes_over_slo={"any_service": s.slo_violation_min, **s.slo_violation_min_by_service},
            slo_ms=self.slo_ms, missing=self.missing, map_digest=self.map_digest,
            events=events, whatif=whatif, change=self.change, forecast=forecast)


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


# -- sections -----------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def review_sections(r: Review) -> list[ReviewSection]:
    """The report's sections, in reading order."""

    return ([_pool_section(r), _rhythm_section(r), _events_section(r), _whatif_section(r),
             _chargeback_section(r)] + ([change_section(r.change)] if r.change is not None else [])
            + ([forecast_section(r.forecast, r.tz)] if r.forecast is not None else []))


def _pool_section(r: Review) -> ReviewSection:
    s = r.summary
    held = s.gpu_hours_by_class
    finding = pool_headline(s)  # the Overview's sentence
    rows = [["Pool size", f"{s.pool_gpus_max:,.0f} GPUs"],
            ["Pool GPU-hours (capacity)", f"{s.gpu_hours:,.0f}"],
            *[[f"GPU-hours, {c}", f"{h:,.0f}"] for c, h in held.items()],
            ["Mean allocation", _pct(s.allocation_pct)], ["Mean activity", _pct(s.activity_pct)],
            [over_slo_label("any service", modelled=False), f"{s.slo_violation_min:,.0f}"],
            *[[f"{over_slo_label(n, modelled=False)} (SLO {r.slo_ms.get(n, 0):g} ms)", f"{m:,.0f}"]
              for n, m in s.slo_violation_min_by_service.items()]]
    fig = None
    if s.steps:
        c, v, _ = thin_for_display(s.classes, s.violations, step_s=r.step_s)
        fig = pool_story_figure(c, v, tz=r.tz)
    return ReviewSection("The pool", finding, tables=[(["measure", "value"], rows)], figure=fig,
                         figure_name="pool-story")


def _rhythm_section(r: Review) -> ReviewSection:
    if r.rhythm is None or r.rhythm.chosen is None or r.rhythm.chosen.summary is None:
        why = r.missing.get("rhythm") or "no traffic, batch or GPU signal with enough days for a rhythm"
        return ReviewSection("Rhythm and collision", f"No rhythm shown: {why}.")

    s = r.rhythm.chosen.summary
    tw = s.tidal_window
    rows = [["Signal", r.rhythm.chosen.signal.label], [f"Peak hour ({s.timezone})", hour_text(s.peak_hour)],
            [f"Trough hour ({s.timezone})", hour_text(s.trough_hour)],
            ["Trough / peak", "n/a" if s.trough_to_peak is None else f"{s.trough_to_peak:.0%}"],
            ["Tidal window", "none" if tw is None else hour_window_text(tw["start_hour"], tw["end_hour"])]]
    finding = rhythm_headline(s, r.rhythm.chosen.signal.label)  # the Rhythm page's sentence
    b = s.batch
    if b is not None:
        rows += [[f"Batch typically starts ({s.timezone})", hour_text(b.typical_start_hour)],
                 ["Batch median hold", "n/a" if b.median_hold_h is None else f"{b.median_hold_h:.1f} h"],
                 ["Days batch held GPUs into the ramp", f"{b.collision_days} of {b.days}"]]
    fig = None
    if r.rhythm.traffic_how is not None:
        fig = hour_of_week_figure(r.rhythm.traffic_how, r.rhythm.batch_how, tz=r.tz)
    return ReviewSection("Rhythm and collision", finding, paragraphs=list(r.rhythm.assumption_notes),
                         tables=[(["measure", "value"], rows)], figure=fig, figure_name="hour-of-week")


def _events_section(r: Review) -> ReviewSection:
    if r.events is None:
        why = r.missing.get("tail events", "not computed")
        return ReviewSection("Tail events", f"No tail events shown: {why}.")

    evs = r.events.events
    if not evs:
        return ReviewSection("Tail events", "No tail events: every service's p99 stayed within its SLO.")
    causes = _count(e.cause for e in evs)
    mis = sum(e.misattributed for e in evs)
    finding = (f"{len(evs)} tail event{'s' if len(evs) != 1 else ''}: " + ", ".join(f"{n} {c.replace('_', ' ')}" for c, n in
                                                       sorted(causes.items(), key=lambda x: -x[1]))
               + f"; {mis} {'was' if mis == 1 else 'were'} batch contention a dashboard would blame "
                 "on users.")
    rows = [[format_time(e.start_ms, r.tz), e.service, e.cause_words, f"{e.duration_min:.0f}",
             f"{e.peak_p99_ms:,.0f}", f"{e.slo_ms:g}", "yes" if e.misattributed else "", e.id] for e in evs]
    return ReviewSection("Tail events", finding, paragraphs=list(r.events.notes), tables=[(
        [f"start ({r.tz})", "service", "cause", "minutes", "peak p99 (ms)", "SLO (ms)", "misattributed", "id"],
        rows)])


def _whatif_section(r: Review) -> ReviewSection:
    if r.calibration is None or r.answer is None:
        why = r.missing.get("what-if", "not computed")
        return ReviewSection("What-if", f"No what-if shown: the store cannot be calibrated ({why}).")

    answer, scn = r.answer, r.scenario
    svc = r.calibration.observation.service
    checks = [f"Backtest ({name}, the observed period replayed under the shared policy): "
              f"{bt['model_violation_minutes']:,.0f} minutes over its SLO replayed vs "
              f"{bt['observed_violation_minutes']:,.0f} observed; batch {bt['model_batch_gpu_hours']:,.0f} "
              f"GPU-hours replayed vs {bt['observed_batch_gpu_hours']:,.0f} observed."
              for name, bt in r.backtests.items()]
    misses = {name: bt for name, bt in r.backtests.items() if not bt.get("within", False)}
    finding = answer.sentence()
    if misses:  # said before any policy, as on the What-if page
        finding = (f"The model does not reproduce what {in_words(list(misses))} went through ("
                   + "; ".join(m for bt in misses.values() for m in bt.get("misses", []))
                   + "), so its policies are directions, not amounts. " + finding)
    pool = answer.breakdown()
    each = [c for c in pool.columns if c.startswith("minutes, ")]
    pool_rows = [[row["policy"], f"{row['violation_minutes']:,.0f}", *[f"{row[c]:,.0f}" for c in each],
                  f"{row['batch_forgone_gpu_hours']:,.0f}", f"${row['cost_total']:,.0f}", row["best"]]
                 for row in pool.iter_rows(named=True)]
    slo = {rep.service: rep.slo_ms for rep in answer.replays}
    # Batch work done and left unfinished beside the minutes: no policy looks good by dropping batch.
    rows = [[n, f"{s.violation_minutes:,.0f}", f"{s.slo_compliance:.1%}", f"{s.p99_ms:,.0f}",
             f"{s.pool_utilization:.0%}", f"{s.batch_goodput_gpu_hours:,.0f}",
             f"{s.batch_unfinished_gpu_hours:,.0f}", f"${s.externality_cost:,.0f}"]
            for n, s in ((n, res.summary) for n, res in r.results.items())]
    agreed = r.agreement
    paragraphs = checks + ([agreed.sentence()] if agreed is not None else []) + [(
        f"{scn.pool.gpus} GPUs in the pool; every policy moves the batch runs that happened over the last days "
        "of the range, and each service is replayed on its own traffic while the others hold the GPUs they "
        "held. The first table is the pool (the answer's minutes, each service's beside them); the second "
        f"and the chart are {svc} alone (SLO p99 {scn.service.slo_ms:g} ms), a breakdown.")]
    return ReviewSection("What-if (modelled)", finding, paragraphs=paragraphs, tables=[
        (["policy", f"minutes over the SLO, pool '{answer.pool}' (all services)",
          *[f"{c} (SLO {slo[c.split(', ', 1)[1]]:g} ms)" for c in each],
          "batch forgone (GPU-h)", "GPU cost", "best"], pool_rows),
        ([f"policy ({svc} alone)", f"minutes over the SLO, {svc}", "SLO compliance", "p99 (ms)",
          "pool utilization", "batch done (GPU-h)", "batch unfinished (GPU-h)", "externality"], rows)],
        figure=typical_day_figure(typical_day(scn, r.results), scn.service.slo_ms, scope=f"{svc}'s p99"),
        figure_name="whatif-typical-day")


def _chargeback_section(r: Review) -> ReviewSection:
    if r.calibration is None or not r.results or r.answer is None:
        return ReviewSection("Chargeback", "No bill: it is priced on the what-if, which the store cannot support.")

    answer = r.answer
    services = in_words(answer.services)
    finding = f"Under the shared pool nobody else's work cost {services} a minute over the SLO."
    if answer.payer is not None:
        finding = (f"Under the shared pool {answer.payer} would pay ${answer.payer_cost:,.0f} for the "
                   f"{answer.payer_minutes:,.0f} minutes over the SLO its work caused {services} (modelled).")
    if any(not bt.get("within", False) for bt in r.backtests.values()):
        finding += " The model misses its backtest (see the what-if): a direction, not an amount."
    svc = r.calibration.observation.service
    bill = bills(r.scenario, r.results)
    rows = [[p, t, f"{g:,.0f}", f"${c:,.0f}", f"${x:,.0f}", f"${tot:,.0f}"]
            for p, t, g, c, x, tot in bill.select("policy", "team", "gpu_hours", "gpu_cost",
                                                  "externality_cost", "total").iter_rows()]
    return ReviewSection("Chargeback (modelled)", finding, paragraphs=[
        f"The bills below are {svc}'s replay (a breakdown): its team's GPU-hours, the batch teams' and the "
        f"minutes over {svc}'s SLO each caused."], tables=[(
            ["policy", "team", "GPU-hours", "GPU cost", "externality", "total"], rows)],
        figure=bills_figure(bill, scope=f"{svc}'s replay"), figure_name="chargeback-bills")


# -- rendering ----------------------------------------------------------------------------------


def review_document(r: Review) -> Document:
    """The review as the one renderer's document; every figure's labels escaped."""
    from dataclasses import replace


    sections = [replace(sec, figure=escape_figure(sec.figure)) if sec.figure is not None else sec
                for sec in review_sections(r)]
    return Document(title=f"Tidelens capacity review: {r.label}", heading="Capacity review",
                    lead=[f"{r.label} · {r.span} · step {r.step_s} s · times in {r.tz}"
                          + (f" · workload map {r.map_digest}" if r.map_digest else "")], sections=sections,
                    notes=[f"Not shown: {part}: {why}" for part, why in r.missing.items()],
                    footer="Generated by Tidelens. Modelled numbers (what-if, chargeback) are labelled as such; "
                           "the rest is observed.")


def review_html(r: Review) -> str:
    """One self-contained HTML page: plotly.js embedded once, every label escaped."""
    return render_html(review_document(r))


def write_review(r: Review, path: str | Path) -> list[Path]:
    """Write the review to ``path`` (``.html``, or ``.md`` with its charts as PNGs beside it).

    Raises
    ------
    ConfigError
        Any other extension.
    """
    return write_document(review_document(r), path, "review")
