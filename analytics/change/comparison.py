"""What a before/after comparison says, typed: each period's numbers (:class:`PeriodNumbers`),
the what-if scored (:class:`ChangeScore`) and the whole comparison (:class:`ChangeComparison`),
their field names the one spelling of each number and ``as_dict`` what ``tidelens change
compare --json`` prints. :mod:`analytics.change.compare` and :mod:`analytics.change.score` fill
them; the review, the What-if page and the CLI read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class PeriodNumbers:
    """One period's numbers (the steps ending in ``(start_ms, end_ms]``), each by the definition
    the pages use (:func:`analytics.change.compare.period_numbers`)."""

    start_ms: int
    end_ms: int
    days: float
    steps: int
    requests: dict[str, float]  # per service
    requests_total: float
    requests_per_day: float
    events: int
    events_by_cause: dict[str, int]
    minutes_over_slo: dict[str, float]  # per service
    minutes_over_slo_any: float
    batch_gpu_hours: float
    batch_queue_delay_min: float | None
    gpus_idle_mean: float | None
    gpus_held_mean: float | None
    activity_pct: float | None
    pool_gpus: float
    per_million_requests: dict[str, Any]  # events, minutes_over_slo (per service), batch_gpu_hours
    violation_minutes: float = 0.0  # the modelled service's minutes over the SLO

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ChangeScore:
    """The what-if scored on a change (:func:`analytics.change.score.score_change`): what it
    predicted from the before-period, the after-period replayed under the enacted and the old
    policy, which bounds held and the parts that differ; or, when a period cannot be calibrated,
    why not (``missing``)."""

    predicted: dict[str, Any] | None = None
    predicted_given_after_inputs: dict[str, Any] | None = None
    after_replay: dict[str, Any] | None = None
    after_old_policy: dict[str, Any] | None = None
    within: dict[str, bool | None] | None = None
    differences: list[str] | None = None
    missing: str | None = None
    sentences: list[str] = field(default_factory=list)

    @property
    def missed(self) -> bool:
        """The prediction or the after-period's replay missed its bound."""
        return bool(self.within) and not (self.within["prediction_violation_minutes"]  # type: ignore[index]
                                          and self.within["after_replay"])  # type: ignore[index]

    def as_dict(self) -> dict[str, Any]:
        """The score's keys in ``tidelens change compare --json`` (its sentences join the comparison's)."""
        if self.missing is not None:
            return {"score_missing": self.missing}
        return {"predicted": self.predicted, "predicted_given_after_inputs": self.predicted_given_after_inputs,
                "after_replay": self.after_replay, "after_old_policy": self.after_old_policy,
                "within": self.within, "differences": self.differences}


@dataclass(frozen=True)
class ChangeComparison:
    """Before and after the change at ``at_ms`` (:func:`analytics.change.compare.compare_change`)."""

    at: str
    at_ms: int
    service: str | None  # the service the what-if models
    slo_ms: float | None  # its SLO
    before: PeriodNumbers
    after: PeriodNumbers
    minutes_gone: dict[str, float]  # per service, before (scaled to the after's length) less after
    traffic_after_vs_before: float | None  # requests a day, after / before
    traffic_sentence: str
    missing: dict[str, str]  # part -> why it is not there
    sentences: list[str]
    change: dict[str, Any] | None = None  # the PolicyChange compared (as recorded)
    score: ChangeScore | None = None

    @property
    def scored(self) -> bool:
        """The what-if was scored (a change given, both periods calibrated)."""
        return self.score is not None and self.score.missing is None

    def as_dict(self) -> dict[str, Any]:
        """``tidelens change compare --json``."""
        out: dict[str, Any] = {
            "at": self.at, "at_ms": self.at_ms, "service": self.service, "slo_ms": self.slo_ms,
            "before": self.before.as_dict(), "after": self.after.as_dict(), "minutes_gone": self.minutes_gone,
            "traffic": {"after_vs_before": self.traffic_after_vs_before, "sentence": self.traffic_sentence},
            "missing": self.missing,
        }
        if self.change is not None:
            out["change"] = self.change
        if self.score is not None:
            out.update(self.score.as_dict())
        out["sentences"] = self.sentences
        return out
