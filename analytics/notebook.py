"""Tidelens in a notebook: a store and a range as one object, with the numbers the app shows.

:func:`open_store` opens a store (``data/tidelens.duckdb``, else the bundled sample, as the app
and the CLI open) and returns a :class:`Lens`: a range, a step and the SLOs, with one method per
analysis. Each method calls the function the pages and the commands call
(:func:`analytics.timeline.store_timelines`, :func:`analytics.events.pipeline.analyse_timelines`,
:func:`analytics.whatif.answer.answer_for`, :func:`analytics.review.review_store`) through the one
result cache (:mod:`analytics.resultcache`): a notebook reads what the app computed, and the other
way round. What they return shows itself in a cell (``_repr_html_``: labels escaped as the
reports escape them) and draws the pages' Plotly figures.

>>> from analytics.notebook import open_store
>>> lens = open_store("data/tidelens.duckdb").between("2026-01-05", "2026-01-08")  # doctest: +SKIP
>>> lens.events()            # the Tail events table; lens.event() the longest   # doctest: +SKIP
>>> lens.whatif().answer(reservation_gpus=24, traffic_growth=1.2)                 # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from analytics.charts.events import attribution_figure, event_figure
from analytics.charts.rhythm import hour_of_week_figure
from analytics.charts.whatif import backtest_figure, bills_figure, typical_day_figure
from analytics.config import find_config
from analytics.document import Document, write_document
from analytics.errors import ConfigError, NotEnoughDataError
from analytics.events import EventsAnalysis, EventsConfig
from analytics.events.event import Event
from analytics.events.pipeline import analyse_timelines, computed_events
from analytics.events.wording import HOLDER_COLUMNS, dashboard_vs_found, evidence_facts, holder_rows, top_event
from analytics.postmortem import report_document
from analytics.review import Review, review_store
from analytics.rhythm import RhythmConfig
from analytics.rhythm.digest import RhythmPageData, rhythm_page_data
from analytics.sample import ensure_default_store
from analytics.slo import SloTable, check_slo_ms, resolve_slos
from analytics.store import DEFAULT_DB, Store
from analytics.text import html_text, visible_frame
from analytics.timeline import Timelines, store_timelines
from analytics.times import parse_time_ms
from analytics.whatif import POLICIES, capacity_plan
from analytics.whatif.answer import (PoolAnswer, PoolCalibration, ServiceReplay, calibrate_pool, pool_answer,
                                     pool_scenarios)
from analytics.whatif.calibrate import calibrate_timelines
from analytics.whatif.form import MODEL_DAYS, last_days
from analytics.whatif.form import apply as apply_edits
from analytics.whatif.ledger import LedgerSummary, bills, policy_table, pool_ledger, summarise_ledger, typical_day
from analytics.whatif.params import PoolScenario
from analytics.whatif.reuse import compare_reusing
from analytics.whatif.transforms import Transforms, apply_transforms
from analytics.workloads import WorkloadMap, load_map

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["Lens", "WhatIf", "open_store"]


def open_store(path: str | Path | None = None, *, config: str | Path | None = None, tz: str = "UTC") -> "Lens":
    """A :class:`Lens` on the store at ``path``: by default ``data/tidelens.duckdb`` when it
    exists, else the bundled sample (built on first use, about a minute), as ``make run`` and the
    CLI open. ``config``: a ``tidelens.toml`` (its ``[slo]`` and workload map), by default
    ``$TIDELENS_CONFIG``, else ``./tidelens.toml`` when it exists, as every surface reads it.
    ``tz``: the zone of the documents' times and the charts' axes (an IANA name).

    Raises
    ------
    ConfigError
        ``path`` names no file (build one with ``tidelens ingest --db PATH FILES``).
    """
    if path is None:
        chosen = DEFAULT_DB if DEFAULT_DB.exists() else ensure_default_store()
    else:
        chosen = Path(path).expanduser()
        if not chosen.is_file():
            raise ConfigError(f"{chosen}: no such store; build one with `tidelens ingest --db {chosen} FILES` "
                              "(or `tidelens sample`), or call open_store() for the bundled sample")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"tz={tz[:80]!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None
    return Lens(path=chosen, config=find_config(config), tz=tz)


def _ms(value: Any, what: str) -> int | None:
    """An instant as a notebook writes it: ISO-8601 / ``now-2d`` text (UTC unless it says), a
    whole number of epoch milliseconds (numpy's too), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        raise ConfigError(f"{what}={value!r}: write an instant as ISO-8601 text (2026-10-05T09:00Z, UTC unless it "
                          "says), now-2d, or whole epoch milliseconds")
    return int(value) if isinstance(value, numbers.Integral) else parse_time_ms(value, what=what)


@dataclass(frozen=True)
class Lens:
    """A store, a range and the settings every analysis of it reads, as the app's sidebar holds
    them. Methods compute once per lens (and once per store content for every surface, through
    the result cache); :meth:`between`, :meth:`with_slo` return a new lens. The frames it returns
    show a label's control and bidirectional-override characters as escapes, as the pages do.

    Parameters
    ----------
    path:
        The store file (opened read-only for each call).
    start_ms, end_ms:
        The range, UTC epoch ms (``None``: from the first / to the last data).
    step_s, min_duration_min, merge_gap_min:
        The timelines' step (seconds) and the detection rule, as the Tail events page's and
        ``tidelens events``' flags set them (an event's id depends on them): :meth:`with_detection`.
    slo_ms:
        One p99 SLO for every service (the CLI's ``--slo-ms``); ``None``: each service's own.
    slo:
        Per-service SLOs, ``{"chat-vllm": 800}`` (the CLI's ``--slo chat-vllm=800``).
    config:
        ``tidelens.toml``: its ``[slo]`` table and workload map.
    tz:
        The zone of the documents' times and the charts' axes.
    """

    path: Path
    start_ms: int | None = None
    end_ms: int | None = None
    step_s: int = 60
    min_duration_min: float = EventsConfig.min_duration_min
    merge_gap_min: float = EventsConfig.merge_gap_min
    slo_ms: float | None = None
    slo: Mapping[str, float] = field(default_factory=dict)
    config: Path | None = None
    tz: str = "UTC"
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def between(self, start: str | int | None = None, end: str | int | None = None) -> "Lens":
        """The same store over ``[start, end)``: ISO-8601 text (UTC unless it says), ``now-7d``,
        or epoch ms; ``None`` keeps the store's first / last data."""
        return dataclasses.replace(self, start_ms=_ms(start, "start"), end_ms=_ms(end, "end"))

    def with_slo(self, slo_ms: float | None = None, per_service: Mapping[str, float] | None = None) -> "Lens":
        """The same store and range judged against ``slo_ms`` for every service (the CLI's
        ``--slo-ms``), or ``per_service`` (``{"chat-vllm": 800}``, the CLI's ``--slo``); ``None``:
        each service's own (``tidelens.toml``, the store). Values by the one SLO rule; a name the
        store has no service of is refused when the SLOs are first read.

        >>> lens = Lens(Path("x.duckdb")).with_slo(per_service={"chat-vllm": 800})
        >>> lens.slo
        {'chat-vllm': 800.0}
        """
        every = None if slo_ms is None else check_slo_ms(slo_ms, "slo_ms")
        each = {str(k): check_slo_ms(v, f"per_service[{k!r}]") for k, v in (per_service or {}).items()}
        return dataclasses.replace(self, slo_ms=every, slo=each)

    def with_detection(self, *, step_s: int | None = None, min_duration_min: float | None = None,
                       merge_gap_min: float | None = None) -> "Lens":
        """The same store and range under another timeline step or detection rule (the Tail events
        page's *Detection* panel, ``tidelens events --step/--min-duration-min/--merge-gap-min``)."""
        changes = {k: v for k, v in (("step_s", step_s), ("min_duration_min", min_duration_min),
                                     ("merge_gap_min", merge_gap_min)) if v is not None}
        out = dataclasses.replace(self, **changes)
        out.events_config()  # refused now, in words, not at the first analysis
        return out

    def _remember(self, key: str, build: Any) -> Any:
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    @contextmanager
    def store(self) -> Iterator[Store]:
        """The store, opened read-only for one ``with`` block (a notebook's own SQL)."""
        with Store(self.path, read_only=True) as st:
            yield st

    def slos(self) -> SloTable:
        """Every service's SLO, decided as the app and the CLI decide them (:func:`analytics.slo.resolve_slos`)."""
        def build() -> SloTable:
            if self.slo:
                unknown = sorted(set(self.slo) - set(self.timelines().service_names()))
                if unknown:
                    raise ConfigError(f"per_service SLO for {', '.join(map(repr, unknown))}: no such service in this "
                                      f"store's range; its services: {', '.join(self.timelines().service_names())}")
            with self.store() as st:
                # "--slo": the source the CLI names, so a notebook and `tidelens --slo` share results
                return resolve_slos(st, config=self.config, every_ms=self.slo_ms, per_service=dict(self.slo),
                                    per_service_source="--slo")
        return self._remember("slos", build)  # type: ignore[no-any-return]

    def workload_map(self) -> WorkloadMap:
        """The workload map (``tidelens.toml``'s, else the defaults): batch vs inference."""
        return self._remember("wmap", lambda: load_map(self.config))  # type: ignore[no-any-return]

    def events_config(self) -> EventsConfig:
        """The detection settings: this lens's step and range, the app's defaults otherwise."""
        return EventsConfig(step_s=self.step_s, start_ms=self.start_ms, end_ms=self.end_ms,
                            min_duration_min=self.min_duration_min, merge_gap_min=self.merge_gap_min)

    def timelines(self) -> Timelines:
        """The pool timeline, the holdings and the service timeline of the range."""
        def build() -> Timelines:
            with self.store() as st:
                return store_timelines(st, self.events_config().timeline_config(), self.workload_map())
        return self._remember("timelines", build)  # type: ignore[no-any-return]

    # -- tail events ------------------------------------------------------------------------------

    def events(self) -> EventsAnalysis:
        """The range's tail events with their causes: ``tidelens events``' and the Tail events
        page's (the same ids). ``.table()`` is the table; ``.events`` the :class:`Event` list."""
        def build() -> EventsAnalysis:
            cfg, slos = self.events_config(), self.slos()
            with self.store() as st:
                found = computed_events(st, cfg, self.workload_map(), slos=slos)
            return found if found is not None else analyse_timelines(self.timelines(), cfg, slos=slos)
        return self._remember("events", build)  # type: ignore[no-any-return]

    def event(self, event_id: str | None = None, service: str | None = None) -> Event:
        """One event: ``event_id``, else the longest (then the higher peak; of ``service``'s
        events when given), the one the Tail events page's headline names.

        Raises
        ------
        ConfigError
            No such event with these settings.
        NotEnoughDataError
            No event at all in the range (of ``service``).
        """
        analysis = self.events()
        if event_id is None or event_id == "":
            top = top_event([e for e in analysis.events if service is None or e.service == service])
            if top is None:
                of = f" of service {service!r}" if service else ""
                raise NotEnoughDataError(f"no tail events{of} in this range: widen it with .between(), or "
                                         "lower the SLO with .with_slo()")
            return top
        try:
            return analysis.event(event_id)
        except KeyError:
            known = ", ".join(e.id for e in analysis.events[:10]) or "none"
            raise ConfigError(f"event {event_id}: no such event with these settings (an id depends on the "
                              f"store, the range, the SLOs and the step); this lens's: {known}") from None

    def event_figure(self, event_id: str | None = None, pad_min: float = 90.0) -> "go.Figure":
        """The Tail events page's timeline of one event: p99, traffic, replicas and who held the GPUs."""
        analysis, ev = self.events(), self.event(event_id)
        return event_figure(analysis.event_window(ev, pad_min), analysis.holdings_window(ev, pad_min), ev, tz=self.tz)

    def attribution_figure(self, event_id: str | None = None) -> "go.Figure":
        """The event's Shapley shares as the page's bar."""
        return attribution_figure(self.event(event_id))

    def holders(self, event_id: str | None = None) -> pl.DataFrame:
        """Who held the pool's GPUs at the event's start, and since when (the evidence's rows)."""
        rows = holder_rows(self.event(event_id), self.tz)
        return visible_frame(pl.DataFrame(rows) if rows else pl.DataFrame(schema=dict.fromkeys(HOLDER_COLUMNS, pl.Utf8)))

    def evidence(self, event_id: str | None = None) -> pl.DataFrame:
        """The event's evidence as labelled quantities (the page's *Evidence* card): the
        autoscaler's wait, the GPUs batch held, traffic against its norm, with units."""
        return visible_frame(pl.DataFrame(evidence_facts(self.event(event_id), self.tz), schema=["fact", "value"],
                                          orient="row"))

    def dashboard_vs_found(self, event_id: str | None = None) -> dict[str, str]:
        """What a dashboard would have concluded beside what happened (the page's two cards)."""
        said, happened = dashboard_vs_found(self.event(event_id))
        return {"the dashboard": said, "what happened": happened}

    def postmortem(self, event_id: str | None = None) -> Document:
        """The postmortem of one event (``tidelens report``'s): shows in a cell; ``.figures()``
        its charts; :meth:`write_postmortem` writes it."""
        return report_document(self.events(), self.event(event_id), tz=self.tz)

    def write_postmortem(self, path: str | Path, event_id: str | None = None) -> list[Path]:
        """Write the postmortem to ``path`` (``.html`` self-contained, or ``.md`` with PNGs)."""
        return write_document(self.postmortem(event_id), path, "postmortem")

    # -- rhythm, what-if, review ------------------------------------------------------------------

    def rhythm(self, signal: str | None = None) -> RhythmPageData:
        """The Rhythm page's data: the chosen signal's MSTL decomposition, the hour-of-week frames."""
        def build() -> RhythmPageData:
            with self.store() as st:
                return rhythm_page_data(st, RhythmConfig(timezone=self.tz), signal=signal, step_s=self.step_s,
                                        start_ms=self.start_ms, end_ms=self.end_ms, wmap=self.workload_map(),
                                        timelines=self.timelines())
        return self._remember(f"rhythm:{signal}", build)  # type: ignore[no-any-return]

    def hour_of_week_figure(self) -> "go.Figure":
        """The Rhythm page's hour-of-week heatmap: traffic beside the batch GPUs held."""
        data = self.rhythm()
        if data.traffic_how is None:
            raise NotEnoughDataError("no traffic signal in this range to draw an hour of the week from")
        return hour_of_week_figure(data.traffic_how, data.batch_how, tz=self.tz)

    def whatif(self, days: int = MODEL_DAYS, service: str | None = None) -> "WhatIf":
        """Every inference service of the pool calibrated (the What-if page's and ``tidelens
        whatif``'s calibration), replayed over the period's last ``days``; ``service``: the
        breakdown's (default: the one most often above its SLO)."""
        def build() -> WhatIf:
            tl, slos = self.timelines(), self.slos()
            pool = calibrate_pool(tl.services, slos,
                                  lambda name: calibrate_timelines(tl, service=name, step_s=self.step_s, slos=slos),
                                  service=service)
            return WhatIf(pool=pool, days=days)
        return self._remember(f"whatif:{days}:{service}", build)  # type: ignore[no-any-return]

    def review(self) -> Review:
        """The capacity review of the range (``tidelens review``'s numbers): shows in a cell;
        ``.numbers()`` is its JSON, ``.document().figures()`` its charts."""
        def build() -> Review:
            with self.store() as st:
                return review_store(st, step_s=self.step_s, start_ms=self.start_ms, end_ms=self.end_ms,
                                    slos=self.slos(), wmap=self.workload_map(), tz=self.tz)
        return self._remember("review", build)  # type: ignore[no-any-return]

    def _repr_html_(self) -> str:
        return self.timelines()._repr_html_().replace("<h4>Timelines", f"<h4>{html_text(str(self.path))}: timelines", 1)


@dataclass(frozen=True)
class WhatIf:
    """The pool's what-if: every service's calibration, and answers under edits a notebook's
    sliders make. A move replays only the policies it changes (:func:`analytics.whatif.reuse.compare_reusing`,
    the What-if page's); the answer is the pages' (:class:`analytics.whatif.answer.PoolAnswer`).
    """

    pool: PoolCalibration
    days: int = MODEL_DAYS

    @property
    def service(self) -> str:
        """The breakdown's service (the one most often above its SLO, unless chosen)."""
        return self.pool.picked

    def bases(self) -> dict[str, PoolScenario]:
        """Each service's calibrated scenario over the period's last ``days`` (unedited)."""
        return {name: last_days(cal.scenario, self.days) for name, cal in self.pool.calibrations.items()}

    def scenario(self, **edits: Any) -> PoolScenario:
        """The breakdown's scenario with ``pool.*`` / ``service.*`` edits (the page's form keys)."""
        return apply_edits(self.bases()[self.service], {_key(k): v for k, v in edits.items()})

    def backtests(self) -> pl.DataFrame:
        """Each service's backtest: the observed period replayed under the shared policy against
        what the store recorded (minutes over the SLO, batch GPU-hours), and what it misses."""
        rows = []
        for name, cal in self.pool.calibrations.items():
            bt = cal.backtest
            rows.append({"service": name, "model_violation_minutes": bt.get("model_violation_minutes"),
                         "observed_violation_minutes": bt.get("observed_violation_minutes"),
                         "model_batch_gpu_hours": bt.get("model_batch_gpu_hours"),
                         "observed_batch_gpu_hours": bt.get("observed_batch_gpu_hours"),
                         "misses": "; ".join(bt.get("misses") or [])})
        return visible_frame(pl.DataFrame(rows))

    def backtest_figure(self, service: str | None = None) -> "go.Figure":
        """The What-if page's backtest chart of one service (default the breakdown's)."""
        cal = self.pool.calibrations[service or self.service]
        return backtest_figure(cal.backtest["frame"], cal.scenario.service.slo_ms)

    def answer(self, *, reservation_gpus: int | None = None, restore_min: float | None = None,
               traffic_growth: float = 1.0, policies: tuple[str, ...] = POLICIES, **pool_edits: Any) -> PoolAnswer:
        """The pool's answer under the edits: the best policy by the one rule, its minutes, who pays.

        Parameters
        ----------
        reservation_gpus:
            GPUs the inference class owns (the partitioned and MIG pools'); ``None``: calibrated.
        restore_min:
            The eviction cost: minutes every batch job loses reloading its state after each
            eviction; ``None``: each job's calibrated value.
        traffic_growth:
            Every service's traffic times this (the page's forward-looking "traffic x").
        pool_edits:
            Any other pool decision by name (``tidal_start_hour=21``, ``headroom=0.2``).
        """
        edits = {_key(k): v for k, v in pool_edits.items()}
        if reservation_gpus is not None:
            edits["pool.reservation_gpus"] = int(reservation_gpus)
        bases = self.bases()
        grown = Transforms(traffic_growth=traffic_growth)
        # As the page: the edited service's scenario carries the edits and the transforms; the
        # others take its pool decisions and the same transforms (pool_scenarios).
        edited = apply_transforms(apply_edits(bases[self.service], edits), grown)
        scns = pool_scenarios(bases, self.service, edited, grown)
        if restore_min is not None:
            scns = {n: with_restore_min(s, float(restore_min)) for n, s in scns.items()}
        replays = [ServiceReplay(n, s, compare_reusing(s, tuple(policies))) for n, s in scns.items()]
        return pool_answer(replays, pool=self.pool.pool, not_modelled=self.pool.not_modelled)

    def policy_table(self, answer: PoolAnswer | None = None, service: str | None = None) -> pl.DataFrame:
        """One service's rows under each policy (the What-if page's table), the pool's best marked."""
        answer = answer or self.answer()
        replay = _replay(answer, service or self.service)
        return visible_frame(policy_table(dict(replay.results), best=answer.best_policy))

    def typical_day_figure(self, answer: PoolAnswer | None = None, service: str | None = None) -> "go.Figure":
        """The What-if page's typical day of one service under each policy."""
        answer = answer or self.answer()
        replay = _replay(answer, service or self.service)
        return typical_day_figure(typical_day(replay.scenario, dict(replay.results)), replay.slo_ms,
                                  scope=f"{replay.service}'s replay")

    def chargeback(self, answer: PoolAnswer | None = None, policy: str = "shared") -> LedgerSummary:
        """Chargeback's ledger under ``policy``: each team billed for the minutes over their SLOs
        its work caused the pool's services, priced (``.table``, ``.top_payer``)."""
        answer = answer or self.answer()
        book = pool_ledger(((r.scenario, r.results) for r in answer.replays), policy)
        summary = summarise_ledger(book, span_h=answer.period_days * 24)
        return dataclasses.replace(summary, table=visible_frame(summary.table))

    def bills_figure(self, answer: PoolAnswer | None = None, service: str | None = None) -> "go.Figure":
        """Chargeback's bills of one service's replay: each team's GPU and externality cost per policy."""
        answer = answer or self.answer()
        replay = _replay(answer, service or self.service)
        return bills_figure(bills(replay.scenario, dict(replay.results)), scope=f"{replay.service}'s replay")

    def plan(self, **edits: Any) -> pl.DataFrame:
        """The three-pool plan (A inference reservation, B soft-shared, C spot for batch) of the
        breakdown's scenario under ``edits``, as Chargeback shows it."""
        return visible_frame(capacity_plan(self.scenario(**edits)))

    def _repr_html_(self) -> str:
        return self.answer()._repr_html_()


def _key(name: str) -> str:
    """A notebook's keyword (``headroom``) as the form's key (``pool.headroom``)."""
    return name if "." in name else f"pool.{name}"


def _replay(answer: PoolAnswer, service: str) -> ServiceReplay:
    for r in answer.replays:
        if r.service == service:
            return r
    raise ConfigError(f"service {service!r} is not replayed in this answer; its services: {', '.join(answer.services)}")


def with_restore_min(scn: PoolScenario, minutes: float) -> PoolScenario:
    """``scn`` with every batch job losing ``minutes`` to reload its state after an eviction."""
    jobs = tuple(dataclasses.replace(j, restore_min=minutes) for j in scn.batch.jobs)
    out = dataclasses.replace(scn, batch=dataclasses.replace(scn.batch, jobs=jobs))
    out.validate()
    return out
