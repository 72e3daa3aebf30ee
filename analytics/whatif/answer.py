"""The pool's default answer: one best policy for every inference service on a pool.

A pool's policy is one decision for every service on it. The model replays one service at a
time (its traffic, its SLO and its team; the pool's other services keep the GPUs they held, as
observed: :mod:`analytics.whatif.calibrate`), so the pool's answer replays each service of the
pool under every policy (:class:`ServiceReplay`) and combines them by the one rule of
:func:`analytics.measures.best_policy` over :func:`analytics.measures.pool_outcomes`: the fewest
minutes over the SLO summed over the services, each against its own SLO. :class:`PoolAnswer` is
what every surface opens on (the What-if page, Chargeback, the capacity review, ``tidelens
whatif`` and ``tidelens review``): the best policy, the minutes it removes and who pays; one
service's rows are a breakdown beside it, never another default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analytics.errors import NotEnoughDataError, TidelensError
from analytics.measures import PoolOutcome, best_policy, over_slo_label, pool_outcomes
from analytics.slo import SloTable, resolve_slos
from analytics.text import html_frame
from analytics.timeline import TimelineConfig, store_timelines
from analytics.whatif.calibrate import Calibration, calibrate_timelines
from analytics.whatif.form import MODEL_DAYS, editable, last_days
from analytics.whatif.form import apply as apply_edits
from analytics.whatif.ledger import pool_ledger, summarise_ledger
from analytics.whatif.observe import pick_service, pool_services
from analytics.whatif.outputs import PolicyResult, compare
from analytics.whatif.params import PoolScenario
from analytics.whatif.policies import POLICIES
from analytics.whatif.transforms import Transforms, apply_transforms

SHARED = "shared"  # the pool as it is run today: the minutes a policy removes are counted from it


@dataclass(frozen=True)
class PoolCalibration:
    """Every inference service of the pool calibrated (each its own :class:`Calibration`, the
    cache's unit), and the service shown first as the breakdown."""

    pool: str
    calibrations: dict[str, Calibration]
    not_modelled: dict[str, str]  # service -> why it could not be calibrated
    picked: str  # the service most often above its SLO (analytics.whatif.observe.pick_service)


def calibrate_pool(services: pl.DataFrame, slos: SloTable | None,
                   calibration: Callable[[str], Calibration], *, service: str | None = None) -> PoolCalibration:
    """Calibrate every inference service of the default pool, or of ``service``'s
    (:func:`analytics.whatif.observe.pool_services`), with ``calibration`` (the caller's own,
    cached, per service): a service the data cannot support is named with the reason, and the
    answer is over the rest. ``picked`` is ``service``, else the one most often above its SLO.

    Raises
    ------
    NotEnoughDataError
        ``service`` cannot be calibrated (its reason), or no service of the pool can (the
        reasons, service by service).
    """
    pool, names = pool_services(services, slos, service)
    cals: dict[str, Calibration] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            cals[name] = calibration(name)
        except TidelensError as exc:
            skipped[name] = str(exc).rstrip(". ")
    if service is not None and service in skipped:  # the one asked for: said as it failed
        raise NotEnoughDataError(skipped[service])
    if not cals:
        raise NotEnoughDataError(f"no service of pool '{pool}' can be calibrated: "
                                 + "; ".join(f"{s}: {why}" for s, why in skipped.items()))
    picked = service or pick_service(services, slos)
    return PoolCalibration(pool, cals, skipped, picked if picked in cals else next(iter(cals)))


@dataclass(frozen=True)
class ServiceReplay:
    """One service of the pool replayed under the policies: its scenario and their results."""

    service: str
    scenario: PoolScenario
    results: Mapping[str, PolicyResult]

    @property
    def team(self) -> str:
        """The team the service's own minutes stay with (the calibration's, from the store)."""
        return self.scenario.service.team

    @property
    def slo_ms(self) -> float:
        return float(self.scenario.service.slo_ms)


def replay_service(scn: PoolScenario, policies: tuple[str, ...] | list[str] = POLICIES,
                   results: Mapping[str, PolicyResult] | None = None) -> ServiceReplay:
    """``scn`` replayed under ``policies`` (``results`` when the caller has them already: the
    page's cached replays)."""
    return ServiceReplay(scn.modelled_service(), scn,
                         dict(results) if results is not None else compare(scn, tuple(policies)))


def pool_scenarios(bases: Mapping[str, PoolScenario], edited: str, scn: PoolScenario,
                   transforms: Transforms | None = None) -> dict[str, PoolScenario]:
    """Every service's scenario of a pool as one of them was edited: ``scn`` for ``edited``
    (every edit of the page or the flags), and each other service's base with ``scn``'s pool
    edits (``pool.*``, the decisions: one pool, one decision for all) and the same
    forward-looking ``transforms``. A service's own parameters (``service.*``) stay its own.

    ``bases`` are the services' unedited scenarios (``edited``'s among them), in the order the
    answer lists them.
    """
    mine, base = editable(scn), editable(bases[edited])
    edits = {k: v for k, v in mine.items() if k.startswith("pool.") and v != base[k]}
    chosen = transforms or Transforms()
    return {name: scn if name == edited else apply_transforms(apply_edits(other, edits), chosen)
            for name, other in bases.items()}


def in_words(names: list[str]) -> str:
    """Names as a sentence lists them.

    >>> in_words(["a"]), in_words(["a", "b"]), in_words(["a", "b", "c"]), in_words([])
    ('a', 'a and b', 'a, b and c', 'no service')
    """
    if not names:
        return "no service"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _minutes(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


@dataclass(frozen=True)
class Headline:
    """One headline number of the answer as a page shows it: label, value, help, and the line
    under the value (``None``: none)."""

    label: str
    value: str
    help: str
    delta: str | None = None


@dataclass(frozen=True)
class PoolAnswer:
    """The pool's default answer: the best policy by the one rule, the minutes it removes from the
    shared pool's, and who pays (under the shared pool, the team billed the most for the minutes
    its work caused the pool's services), with each service's minutes as the breakdown."""

    pool: str
    replays: tuple[ServiceReplay, ...]
    outcomes: dict[str, PoolOutcome]
    best_policy: str | None
    payer: str | None
    payer_cost: float
    payer_minutes: float
    period_days: float
    not_modelled: dict[str, str] = field(default_factory=dict)  # service -> why it is not replayed

    @property
    def services(self) -> list[str]:
        return [r.service for r in self.replays]

    def minutes(self, policy: str | None) -> float | None:
        """The pool's minutes over the SLO under ``policy`` (every service's, summed)."""
        out = self.outcomes.get(policy) if policy is not None else None
        return None if out is None else out.violation_minutes

    @property
    def best_minutes(self) -> float | None:
        return self.minutes(self.best_policy)

    @property
    def shared_minutes(self) -> float | None:
        return self.minutes(SHARED)

    @property
    def removed_minutes(self) -> float | None:
        """The shared pool's minutes the best policy removes (``None`` without a shared replay)."""
        best, shared = self.best_minutes, self.shared_minutes
        return None if best is None or shared is None else shared - best

    def scope(self) -> str:
        """What the answer's minutes are: which services, against which SLO, over which days,
        modelled (the words every label of them names)."""
        days = f"{self.period_days:.3g} day{'s' if round(self.period_days, 3) != 1 else ''}"
        each = "its own SLO" if len(self.replays) == 1 else "each against its own SLO"
        return f"{in_words(self.services)}, {each}, modelled over the last {days}"

    def headline(self) -> str:
        """The answer in a few words: the best policy and its minutes."""
        if self.best_policy is None:
            return "no policy replayed"
        return f"{self.best_policy}: {self.best_minutes:,.0f} minutes over the SLO"

    def headlines(self) -> list[Headline]:
        """The answer as the pages' headline numbers: the best policy, its minutes over the SLO
        (with the shared pool's minutes it removes), the shared pool's, and who pays under the
        shared pool. Labels name their scope; the help names the services and the days."""
        scope = self.scope()
        rule = ("the fewest whole minutes over the SLO summed over the pool's services, each against "
                "its own SLO; ties to the least batch work forgone, then the cheaper")
        best, shared = self.best_minutes, self.shared_minutes
        removed = (f"{round(shared) - round(best):,.0f} fewer than the shared pool"
                   if best is not None and shared is not None and self.best_policy != SHARED else None)
        paid = (f"${self.payer_cost:,.0f} for {self.payer_minutes:,.0f} minutes"
                if self.payer is not None else None)
        return [
            Headline(f"Best policy, pool '{self.pool}'", self.best_policy or "none", f"{scope}. The rule: {rule}."),
            Headline(over_slo_label("pool, best policy", modelled=True), _minutes(best),
                     f"{scope}, under {self.best_policy}", removed),
            Headline(over_slo_label("pool, shared", modelled=True), _minutes(shared),
                     f"{scope}, under the shared pool (the pool as it is run)"),
            Headline("Who pays, shared pool", self.payer or "nobody else",
                     "The team whose work cost the pool's services the most minutes over their SLOs "
                     f"under the shared pool, priced ({scope})", paid)]

    def sentence(self) -> str:
        """The answer as one sentence a room can quote: the best policy, what it removes, who pays."""
        if self.best_policy is None:
            return f"Pool '{self.pool}': no policy was replayed."
        best, shared = self.best_minutes or 0.0, self.shared_minutes
        said = (f"Best policy for pool '{self.pool}' ({self.scope()}): {self.best_policy}, "
                f"{best:,.0f} minutes over the SLO")
        if shared is not None and self.best_policy != SHARED:
            said += (f" where the shared pool has {shared:,.0f}: it removes "
                     f"{round(shared) - round(best):,.0f}.")
        elif shared is not None:
            said += ": no policy has fewer than the shared pool."
        else:
            said += "."
        if shared is not None:
            said += (f" Under the shared pool {self.payer} pays ${self.payer_cost:,.0f} for the "
                     f"{self.payer_minutes:,.0f} minutes its work caused." if self.payer is not None else
                     " Under the shared pool no other team's work cost these services a minute.")
        if self.not_modelled:
            said += " Not modelled: " + "; ".join(f"{s} ({why})" for s, why in self.not_modelled.items()) + "."
        return said

    def breakdown(self) -> pl.DataFrame:
        """One row per policy: the pool's minutes over the SLO and each service's beside them
        (``minutes, <service>``, adding up to the pool's), the batch work forgone and the GPU cost
        the rule reads, and ``best``: the pool's best policy marked."""
        rows = []
        for name, out in self.outcomes.items():
            rows.append({"policy": name, "best": "best for the pool" if name == self.best_policy else "",
                         "violation_minutes": out.violation_minutes,
                         **{f"minutes, {s}": m for s, m in out.violation_minutes_by_service.items()},
                         "batch_forgone_gpu_hours": out.batch_lost_gpu_hours + out.batch_unfinished_gpu_hours,
                         "cost_total": out.cost_total})
        return pl.DataFrame(rows)

    def _repr_html_(self) -> str:
        """The answer as a notebook cell shows it: the sentence, then the policies' breakdown."""
        return html_frame(f"What-if: pool '{self.pool}'", self.breakdown(), [self.sentence()],
                          notes=[f"{self.scope()}; minutes over the SLO, modelled"])

    def as_dict(self) -> dict[str, Any]:
        """The answer as ``tidelens whatif --json`` and ``tidelens review --json`` write it."""
        return {
            "pool": self.pool, "services": self.services,
            "slo_ms": {r.service: r.slo_ms for r in self.replays},
            "teams": {r.service: r.team for r in self.replays},
            "period_days": self.period_days, "scope": self.scope(),
            "best_policy": self.best_policy, "violation_minutes": self.best_minutes,
            "shared_violation_minutes": self.shared_minutes, "removed_minutes": self.removed_minutes,
            "payer": self.payer, "payer_cost": self.payer_cost, "payer_minutes": self.payer_minutes,
            "policies": {n: {"violation_minutes": o.violation_minutes,
                             "violation_minutes_by_service": dict(o.violation_minutes_by_service),
                             "batch_lost_gpu_hours": o.batch_lost_gpu_hours,
                             "batch_unfinished_gpu_hours": o.batch_unfinished_gpu_hours,
                             "cost_total": o.cost_total} for n, o in self.outcomes.items()},
            "not_modelled": dict(self.not_modelled), "sentence": self.sentence()}


def pool_answer(replays: list[ServiceReplay] | tuple[ServiceReplay, ...], *, pool: str = "default",
                not_modelled: Mapping[str, str] | None = None) -> PoolAnswer:
    """The pool's answer from its services' replays (each under the same policies).

    The payer: under the shared pool, the team other than a service's own whose work cost the
    pool's services the most (the violation minutes it caused them, priced: the Chargeback
    ledger's :func:`analytics.whatif.ledger.summarise_ledger` over every service), ties to the
    earlier name; ``None`` when nobody else's work cost a minute.
    """
    replays = tuple(replays)
    outcomes = pool_outcomes({r.service: {n: res.summary for n, res in r.results.items()} for r in replays})
    paid = summarise_ledger(pool_ledger(((r.scenario, r.results) for r in replays), SHARED))
    first = replays[0].scenario if replays else None
    return PoolAnswer(
        pool=pool, replays=replays, outcomes=outcomes, best_policy=best_policy(outcomes), payer=paid.top_payer,
        payer_cost=paid.top_payer_cost, payer_minutes=paid.top_payer_minutes,
        period_days=first.steps * first.step_s / 86400.0 if first is not None else 0.0,
        not_modelled=dict(not_modelled or {}))


def answer_for(pc: PoolCalibration, *, days: int, policies: tuple[str, ...] | list[str] = POLICIES,
               edited: str | None = None, scenario: PoolScenario | None = None,
               transforms: Transforms | None = None,
               replay: Callable[[PoolScenario], Mapping[str, PolicyResult]] | None = None) -> PoolAnswer:
    """The pool's answer over the last ``days`` of every calibrated service (the what-if's
    period), with ``scenario`` (``edited``'s scenario as the page or the flags made it) standing
    for that service and its pool edits applied to the others (:func:`pool_scenarios`).

    ``replay`` replays one scenario under ``policies`` (default :func:`analytics.whatif.compare`;
    the page passes its cached one, so a slider move replays only what changed).
    """
    bases = {name: last_days(cal.scenario, days) for name, cal in pc.calibrations.items()}
    scns = bases if scenario is None or edited is None else pool_scenarios(bases, edited, scenario, transforms)
    run = replay or (lambda s: compare(s, tuple(policies)))
    return pool_answer([replay_service(s, policies, results=run(s)) for s in scns.values()],
                       pool=pc.pool, not_modelled=pc.not_modelled)


def scenario_answer(scn: PoolScenario, results: Mapping[str, PolicyResult]) -> PoolAnswer:
    """The answer of a scenario alone (a preset, a saved file: one service, a pool of one)."""
    return pool_answer([replay_service(scn, results=results)], pool=scn.name)


def answer_store(store: Any, *, step_s: int = 60, start_ms: int | None = None, end_ms: int | None = None,
                 slos: SloTable | None = None, wmap: Any = None, days: int = MODEL_DAYS) -> PoolAnswer:
    """The pool's answer for a store's range in one call (a notebook's), as the pages, the review
    and ``tidelens whatif`` say it: the store's timelines (:func:`analytics.timeline.store_timelines`),
    every service of the default pool calibrated (``slos``: by default the store's and
    ``tidelens.toml``'s, :func:`analytics.slo.resolve_slos`), replayed over the last ``days``."""
    table = slos if slos is not None else resolve_slos(store)
    tl = store_timelines(store, TimelineConfig(step_s=step_s, start_ms=start_ms, end_ms=end_ms), wmap)
    pool = calibrate_pool(tl.services, table,
                          lambda name: calibrate_timelines(tl, service=name, step_s=step_s, slos=table))
    return answer_for(pool, days=days)
