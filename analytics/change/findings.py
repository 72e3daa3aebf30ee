"""The before/after of a change as words and tables: the capacity review's section and the
What-if page's, from one :func:`analytics.change.compare.compare_change` result.

A missed bound is said first, with the part that differs, before any number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analytics.change.basis import change_basis
from analytics.change.compare import compare_change
from analytics.change.comparison import ChangeComparison
from analytics.change.record import list_changes
from analytics.document import Section
from analytics.slo import SloTable

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

# The prediction's range is the before-period's day-to-day variation only (not the model's error).
DAY_RANGE_LABEL = ("  its 80% range: after-periods made of the before-period's days (10th-90th percentile), "
                   "calibrated on the project's own changes")
MEASURES: tuple[tuple[str, str], ...] = (
    ("violation_minutes", "minutes over the SLO, {service}"),
    ("minutes_over_slo_any", "minutes over the SLO, any service"),
    ("events", "tail events"),
    ("batch_gpu_hours", "batch GPU-hours delivered"),
    ("batch_queue_delay_min", "batch queueing delay (minutes a workload)"),
    ("gpus_idle_mean", "GPUs idle (mean)"),
    ("gpus_held_mean", "GPUs held (mean)"),
    ("activity_pct", "GPU activity (%)"),
    ("requests_per_day", "requests a day"),
)


def _num(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def measure_rows(out: ChangeComparison) -> list[list[str]]:
    """Each measure before and after, raw and per million requests where it has one."""
    b, a = out.before, out.after
    svc = out.service or "the service"
    rows = [[label.format(service=svc), _num(getattr(b, key), 0 if key == "events" else 1),
             _num(getattr(a, key), 0 if key == "events" else 1)] for key, label in MEASURES]
    for cause in sorted(set(b.events_by_cause) | set(a.events_by_cause)):
        rows.append([f"tail events, {cause.replace('_', ' ')}", str(b.events_by_cause.get(cause, 0)),
                     str(a.events_by_cause.get(cause, 0))])
    for name in sorted(set(b.minutes_over_slo) | set(a.minutes_over_slo)):
        rows.append([f"minutes over the SLO, {name}", _num(b.minutes_over_slo.get(name)),
                     _num(a.minutes_over_slo.get(name))])
        pb, pa = b.per_million_requests["minutes_over_slo"], a.per_million_requests["minutes_over_slo"]
        rows.append([f"  per million requests, {name}", _num(pb.get(name), 3), _num(pa.get(name), 3)])
    rows.append(["tail events per million requests", _num(b.per_million_requests["events"], 4),
                 _num(a.per_million_requests["events"], 4)])
    return rows


def score_header(out: ChangeComparison) -> list[str]:
    """The headers of :func:`score_rows`: its minutes are the compared service's, observed and modelled."""
    return ["the what-if, scored", f"minutes over the SLO, {out.service}", "batch GPU-hours"]


def score_rows(out: ChangeComparison) -> list[list[str]]:
    """before, after, predicted, after_replay (and the old policy): minutes and batch GPU-hours."""
    rows = [[label, _num(side.violation_minutes), _num(side.batch_gpu_hours)]
            for side, label in ((out.before, "before (observed)"), (out.after, "after (observed)"))]
    if not out.scored or out.score is None:
        return rows
    sc = out.score
    for part, label in ((sc.predicted, "predicted from the before-period"),
                        (sc.after_replay, "after, replayed under the enacted policy"),
                        (sc.after_old_policy, "after, replayed under the old (shared) policy")):
        assert part is not None  # a scored comparison has every part
        rows.append([label, _num(part["violation_minutes"]), _num(part["batch_gpu_hours"])])
        rng = part.get("range_violation_minutes") if part is sc.predicted else None
        if rng:
            rows.append([DAY_RANGE_LABEL, f"{_num(rng[0])} to {_num(rng[1])}", ""])
    return rows


def finding(out: ChangeComparison) -> str:
    """One sentence: a missed bound and its part first, else what went away and how the what-if did."""
    svc = out.service
    change = out.change or {}
    what = f"{change.get('policy', 'the change')} from {out.at}"
    sc = out.score
    within = sc.within if sc is not None else None
    if sc is not None and sc.missed:
        parts = "; ".join(sc.differences or ["no single part stands out"])
        which = ("its prediction from the before-period and its replay of the after-period miss"
                 if not (within["prediction_violation_minutes"] or within["after_replay"]) else
                 "its prediction from the before-period misses" if not within["prediction_violation_minutes"]
                 else "its replay of the after-period under the enacted policy misses")
        return f"After {what} the what-if's {which.removeprefix('its ')} what happened ({parts})."
    b, a = out.before.violation_minutes, out.after.violation_minutes
    text = (f"After {what}, {svc} was over its SLO for {a:,.0f} minutes in {out.after.days:.3g} days, "
            f"against {b:,.0f} in the {out.before.days:.3g} days before")
    if within and sc is not None and sc.predicted is not None:
        text += (f"; the what-if predicted {sc.predicted['violation_minutes']:,.0f} from the before-period alone "
                 "and its replay of the after-period is within the backtest's bounds")
    return text + "."


def change_section(out: ChangeComparison) -> Section:
    """The capacity review's section for one change (``compare_change``'s result)."""

    paragraphs = list(out.sentences)
    paragraphs += [f"Not shown: {k}: {v}" for k, v in out.missing.items()]
    tables = [(["measure", "before", "after"], measure_rows(out))]
    if out.scored:
        tables.append((score_header(out), score_rows(out)))
    return Section("Before and after the change", finding(out), paragraphs=paragraphs, tables=tables)


def review_change(store: "Store", *, step_s: int, slos: SloTable, start_ms: int | None,
                  end_ms: int | None, wmap: "WorkloadMap | None" = None, events: Any = None) -> ChangeComparison | None:
    """The compare of the latest change the store records inside the review's range (None: none
    recorded there), its periods the default week either side, cut at the data."""

    inside = [c for c in list_changes(store) if (start_ms is None or c.at_ms > start_ms)
              and (end_ms is None or c.at_ms < end_ms)]
    if not inside:
        return None
    basis = change_basis(store, step_s=step_s, slos=slos, wmap=wmap, with_events=events is None)
    if events is not None:
        basis.events = events
    return compare_change(basis, inside[-1].at_ms, None, inside[-1])
