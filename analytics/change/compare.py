"""Before and after a change, the same definitions on both sides, and the what-if scored.

:func:`compare_change` cuts the period before the change and the period after it from one
:class:`~analytics.change.basis.ChangeBasis` and measures both the same way: tail events by
cause, minutes over the SLO per service (:func:`analytics.overview.summarise`, the one rule of
:mod:`analytics.measures`), batch GPU-hours and their queueing delay, GPUs idle and held, each
raw and per million requests, with each period's traffic beside them.

With a :class:`~analytics.change.record.PolicyChange` it also scores the what-if
(:func:`analytics.change.score.score_change`): its prediction for the enacted policy from the
before-period alone against the after-period observed, and the after-period replayed under the
enacted policy (the backtest's bounds) and under the old one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from analytics.change.basis import ChangeBasis
from analytics.change.comparison import ChangeComparison, PeriodNumbers
from analytics.change.score import score_change
from analytics.errors import ConfigError, NotEnoughDataError
from analytics.fieldhelp import out_of_bounds
from analytics.overview import summarise
from analytics.times import iso_utc
from analytics.whatif.observe import pick_service

if TYPE_CHECKING:
    from analytics.change.record import PolicyChange

DAY_MS = 86_400_000
BUSIER = 0.05  # an after-period this much busier (or quieter) a day is said to be


@dataclass(frozen=True)
class CompareConfig:
    """The periods either side of a change (the CLI's flags and the page's sliders)."""

    before_days: float = field(default=7.0, metadata={
        "help": "days before the change to compare (cut at the store's first data)", "min": 0.5, "max": 90.0,
        "step": 0.5, "unit": "days"})
    after_days: float = field(default=7.0, metadata={
        "help": "days after the change to compare (cut at the store's last data)", "min": 0.5, "max": 90.0,
        "step": 0.5, "unit": "days"})
    service: str | None = field(default=None, metadata={
        "help": "the service the what-if models (default: the one most often over its SLO before the change)"})

    def validate(self) -> "CompareConfig":
        """The config itself; ``ConfigError`` naming the flag outside its bounds otherwise."""

        for f, v in out_of_bounds(self):
            raise ConfigError(f"--{f.name.replace('_', '-')} {v:g}: give {f.metadata['min']:g} to "
                              f"{f.metadata['max']:g} {f.metadata['unit']}")
        return self


def _requests(services: pl.DataFrame, step_s: int) -> dict[str, float]:
    """Requests each service served in the steps (rate x step length)."""
    if services.height == 0:
        return {}
    got = services.group_by("service").agg((pl.col("rps").fill_null(0.0).sum() * step_s).alias("n")).sort("service")
    return {str(s): float(n) for s, n in got.iter_rows() if s is not None}


def _per_million(x: float, requests: float) -> float | None:
    return x / (requests / 1e6) if requests > 0 else None


def _queue_delay_min(basis: ChangeBasis, start_ms: int, end_ms: int) -> float | None:
    """Mean minutes a batch workload waited in Kueue's queue, by Little's law: workloads pending
    on average over the period, times its length, over the workloads admitted in it."""
    k = basis.kueue
    if k is None:
        return None
    part = k.filter((pl.col("ts_ms") > start_ms) & (pl.col("ts_ms") <= end_ms))
    if part.height < 2:
        return None
    adm = part["admitted_total"].to_numpy()
    admitted = float(np.clip(np.diff(adm), 0.0, None).sum())  # a counter reset restarts at 0
    if admitted <= 0:
        return None
    minutes = (int(part["ts_ms"][-1]) - int(part["ts_ms"][0])) / 60_000.0
    return float(part["pending"].mean()) * minutes / admitted


def period_numbers(basis: ChangeBasis, start_ms: int, end_ms: int) -> PeriodNumbers:
    """One period's numbers (steps ending in ``(start_ms, end_ms]``), every one by the
    definition the pages use."""

    tl = basis.period(start_ms, end_ms)
    s = summarise(tl.pool, tl.holdings, tl.services, basis.slos, basis.step_s)
    hours = s.steps * basis.step_s / 3600.0
    days = hours / 24.0
    req = _requests(tl.services, basis.step_s)
    total = float(sum(req.values()))
    held = s.gpu_hours_by_class
    evs = [e for e in (basis.events.events if basis.events is not None else [])
           if start_ms < e.start_ms <= end_ms]
    by_cause: dict[str, int] = {}
    for e in evs:
        by_cause[e.cause] = by_cause.get(e.cause, 0) + 1
    minutes = dict(s.slo_violation_min_by_service)
    return PeriodNumbers(
        start_ms=int(start_ms), end_ms=int(end_ms), days=round(days, 3), steps=s.steps,
        requests=req, requests_total=total,
        requests_per_day=total / days if days > 0 else 0.0,
        events=len(evs), events_by_cause=dict(sorted(by_cause.items())),
        minutes_over_slo=minutes, minutes_over_slo_any=s.slo_violation_min,
        batch_gpu_hours=held.get("batch", 0.0),
        batch_queue_delay_min=_queue_delay_min(basis, start_ms, end_ms),
        gpus_idle_mean=held.get("idle", 0.0) / hours if hours > 0 else None,
        gpus_held_mean=sum(held.get(c, 0.0) for c in ("inference", "batch", "other")) / hours if hours > 0 else None,
        activity_pct=s.activity_pct, pool_gpus=s.pool_gpus_max,
        per_million_requests={
            "events": _per_million(len(evs), total),
            "minutes_over_slo": {k: _per_million(m, req.get(k, 0.0)) for k, m in minutes.items()},
            "batch_gpu_hours": _per_million(held.get("batch", 0.0), total)},
    )


def periods(basis: ChangeBasis, at_ms: int, cfg: CompareConfig) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(start, end]`` of the before- and after-period, cut at the store's span.

    Raises
    ------
    NotEnoughDataError
        The change is outside the data, or one side has less than a step.
    """
    if not basis.first_ms < at_ms < basis.last_ms:

        raise NotEnoughDataError(f"the change at {iso_utc(at_ms)} is outside the store's data "
                                 f"({iso_utc(basis.first_ms)} to {iso_utc(basis.last_ms)}): nothing before or after it")
    before = (max(at_ms - int(cfg.before_days * DAY_MS), basis.first_ms - basis.step_s * 1000), at_ms)
    after = (at_ms, min(at_ms + int(cfg.after_days * DAY_MS), basis.last_ms))
    return before, after


def traffic_sentence(before: PeriodNumbers, after: PeriodNumbers) -> str:
    """The two periods' traffic side by side, a busier (or quieter) after-period said."""
    b, a = before.requests_per_day, after.requests_per_day
    if b <= 0:
        return "The before-period served no requests: nothing to set the after-period's traffic against."
    r = a / b - 1.0
    said = (f"The after-period was busier: {r:.0%} more requests a day ({a:,.0f} vs {b:,.0f}); compare per "
            "million requests") if r > BUSIER else (
        f"The after-period was quieter: {-r:.0%} fewer requests a day ({a:,.0f} vs {b:,.0f}); compare per "
        "million requests") if r < -BUSIER else f"Both periods served about as many requests a day ({a:,.0f} vs {b:,.0f})"
    return said + "."


def compare_change(basis: ChangeBasis, at_ms: int, cfg: CompareConfig | None = None,
                   change: "PolicyChange | None" = None, *, score: bool = True) -> ChangeComparison:
    """Before and after the change at ``at_ms`` (see the module); ``tidelens change compare
    --json`` prints its :meth:`~analytics.change.comparison.ChangeComparison.as_dict`.

    ``before`` and ``after`` are :func:`period_numbers` (``violation_minutes``: the modelled
    service's minutes over the SLO), ``minutes_gone`` per service, before less after, both per
    day of the after-period; with ``change`` and ``score`` the what-if scored
    (:func:`analytics.change.score.score_change`).
    """

    cfg = (cfg or CompareConfig()).validate()
    known = basis.timelines.service_names()
    if cfg.service is not None and cfg.service not in known:  # never 0 minutes of a service not there
        raise ConfigError(f"--service {cfg.service!r}: no such service in the store; its services: "
                          f"{', '.join(known) or 'none'}")
    (b0, b1), (a0, a1) = periods(basis, at_ms, cfg)
    before, after = period_numbers(basis, b0, b1), period_numbers(basis, a0, a1)
    if not before.steps or not after.steps:
        raise NotEnoughDataError("one side of the change has no steps: move the change or lengthen the periods")
    svc_frame = basis.period(b0, b1).services
    service = cfg.service
    if service is None and svc_frame.height:
        service = pick_service(svc_frame, basis.slos)
    before, after = (replace(side, violation_minutes=side.minutes_over_slo.get(service, 0.0) if service else 0.0)
                     for side in (before, after))
    scale = after.days / before.days if before.days else 0.0
    gone = {k: before.minutes_over_slo.get(k, 0.0) * scale - after.minutes_over_slo.get(k, 0.0)
            for k in sorted(set(before.minutes_over_slo) | set(after.minutes_over_slo))}
    traffic = traffic_sentence(before, after)
    sentences = [traffic]
    for name in sorted(gone):
        b, a = before.minutes_over_slo.get(name, 0.0), after.minutes_over_slo.get(name, 0.0)
        sentences.append(f"{name}: {b:,.0f} minutes over the SLO in the {before.days:.3g} days before, {a:,.0f} in "
                         f"the {after.days:.3g} days after ({gone[name]:,.0f} fewer, the before-period "
                         "scaled to the after-period's length).")
    scored = None
    if change is not None and score and service is not None:
        scored = score_change(basis, change, (b0, b1), (a0, a1), service, before, after)
        sentences.extend(scored.sentences)
    return ChangeComparison(
        at=iso_utc(at_ms), at_ms=int(at_ms), service=service, slo_ms=basis.slos.ms(service) if service else None,
        before=before, after=after, minutes_gone=gone,
        traffic_after_vs_before=after.requests_per_day / before.requests_per_day if before.requests_per_day else None,
        traffic_sentence=traffic, missing=dict(basis.missing), sentences=sentences,
        change=change.as_dict() if change is not None else None, score=scored)
