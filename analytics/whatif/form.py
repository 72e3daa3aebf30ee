"""A scenario's editable parameters as flat ``group.field`` keys: what the What-if page's
controls and its URL carry, so a copied link reopens the same what-if.

Only parameters that differ from the base scenario (a preset or the calibration) travel in
the URL; applying them to the same base rebuilds the scenario exactly.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from analytics.errors import ConfigError
from analytics.times import step_start_ms, utc_hour
from analytics.units import hour_text  # noqa: F401 - the one clock format (the decisions' hours, re-exported)
from analytics.whatif.mig import MIG_PROFILES
from analytics.whatif.params import BatchJob, BatchParams, PoolParams, PoolScenario, ServiceParams

GROUPS: dict[str, type] = {"service": ServiceParams, "pool": PoolParams}
# Days of a calibrated store's period the what-ifs replay (the page and the CLI alike); the
# backtest replays the whole period.
MODEL_DAYS = 7
# The parameters a capacity review decides (the What-if page's first controls, with units);
# every other parameter is calibrated or a model detail, under "Advanced: model parameters".
DECISIONS: tuple[str, ...] = ("pool.gpus", "pool.headroom", "pool.reservation_gpus",
                              "pool.polite_release_hour", "pool.tidal_start_hour",
                              "pool.tidal_end_hour", "pool.mig_profile", "pool.timeslice_replicas",
                              "pool.checkpoint_interval_min")
# Checkpoint intervals a room picks from (minutes; -1 each job's own, 0 Young/Daly).
CHECKPOINT_CHOICES_MIN: tuple[float, ...] = (-1.0, 0.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)


def checkpoint_text(minutes: float) -> str:
    """A checkpoint interval as the decision reads.

    >>> checkpoint_text(-1), checkpoint_text(0), checkpoint_text(30)
    ("each job's own", 'optimal (Young/Daly)', 'every 30 min')
    """
    if minutes < 0:
        return "each job's own"
    return "optimal (Young/Daly)" if minutes == 0 else f"every {minutes:g} min"


def param_help(key: str, scn: PoolScenario) -> str:
    """A ``group.field`` parameter's help text, and where ``scn``'s value came from."""
    group, name = key.split(".", 1)
    meta = next(f.metadata for f in fields(GROUPS[group]) if f.name == name)
    where = scn.provenance.get(key)
    return str(meta.get("help", "")) + (f" · from {where}" if where else "")


def hour_choices(current: float, step_h: float = 0.25) -> list[float]:
    """Hours of day every ``step_h`` (a quarter hour), with ``current`` among them.

    >>> len(hour_choices(9.0)), hour_choices(9.1)[36:39]
    (96, [9.0, 9.1, 9.25])
    """
    n = int(round(24 / step_h))
    out = [round(i * step_h, 4) for i in range(n)]
    if current not in out:
        out = sorted([*out, float(current)])
    return out


def mig_choices(gpu_model: str) -> list[str]:
    """``auto`` and the MIG profiles of ``gpu_model`` (none for a model without a MIG table)."""

    return ["auto", *(p.name for p in MIG_PROFILES.get(gpu_model, ()))]


def editable(scn: PoolScenario) -> dict[str, Any]:
    """``{"service.slo_ms": 100.0, "pool.gpus": 64, ...}`` for every scalar parameter."""
    out: dict[str, Any] = {}
    for group, obj in (("service", scn.service), ("pool", scn.pool)):
        for f in fields(obj):
            out[f"{group}.{f.name}"] = getattr(obj, f.name)
    return out


def parse_value(value: Any, default: Any, key: str) -> Any:
    """``value`` (a URL string, a widget value) as the type of ``default``.

    Raises ``ConfigError`` when it cannot be read as that type.
    """
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}={value!r}: write true or false")
    if isinstance(default, int):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={value!r}: write a whole number") from None
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={value!r}: write a number") from None
    return str(value)


def apply(scn: PoolScenario, changes: dict[str, Any]) -> PoolScenario:
    """``scn`` with ``group.field`` values replaced (strings parsed by the field's type).

    Unknown keys raise ``ConfigError``; the result is validated. Provenance of each changed
    parameter becomes ``user``.
    """
    base = editable(scn)
    by_group: dict[str, dict[str, Any]] = {"service": {}, "pool": {}}
    prov = dict(scn.provenance)
    for key, value in changes.items():
        if key not in base:
            raise ConfigError(f"unknown scenario parameter {key!r}; known: service.* and pool.* "
                              "fields of the model")
        v = parse_value(value, base[key], key)
        if v != base[key]:
            group, name = key.split(".", 1)
            by_group[group][name] = v
            prov[key] = "user"
    if not any(by_group.values()):
        return scn
    out = replace(scn, service=replace(scn.service, **by_group["service"]),
                  pool=replace(scn.pool, **by_group["pool"]), provenance=prov)
    out.validate()
    return out


def changed(scn: PoolScenario, base: PoolScenario) -> dict[str, str]:
    """Parameters of ``scn`` that differ from ``base``, as URL-ready strings."""
    a, b = editable(scn), editable(base)
    return {k: (str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float)
                else str(v)) for k, v in a.items() if v != b[k]}


def from_query(params: dict[str, str], prefix: str = "w_") -> dict[str, str]:
    """The ``group.field`` entries of a query-parameter dict (``w_pool.gpus=48``)."""
    out = {}
    for k, v in params.items():
        if k.startswith(prefix) and "." in k:
            key = k[len(prefix):]
            if key.split(".", 1)[0] in GROUPS:
                out[key] = v
    return out


def last_days(scn: PoolScenario, days: int) -> PoolScenario:
    """The scenario's last ``days`` days (all of it when shorter): what the page models, so
    a slider move replays a week rather than the whole calibrated period."""
    n = int(days * 86400 // scn.step_s)
    if days <= 0 or n >= scn.steps:
        return scn
    start = int(scn.ts_ms()[scn.steps - n])
    prov = {**scn.provenance,
            "traffic_rps": scn.provenance.get("traffic_rps", "") + f" (last {days} days)"}
    others = scn.others_gpus[-n:] if scn.others_gpus is not None else None
    return replace(scn, traffic_rps=scn.traffic_rps[-n:], others_gpus=others, start_ts_ms=start,
                   provenance=prov, batch=BatchParams(jobs=_runs_from(scn.batch.jobs, start, scn.step_s)))


def _runs_from(jobs: tuple[BatchJob, ...], start_ms: int, step_s: int) -> tuple[BatchJob, ...]:
    """The runs that happened as seen from ``start_ms`` (the end of a period's first step): a
    run over before it is dropped, one under way keeps the part it had left, arriving at once;
    daily jobs are kept as they are."""
    step_ms = step_s * 1000
    out = []
    for j in jobs:
        if j.arrival_ms < 0 or j.arrival_ms >= start_ms:
            out.append(j)
            continue
        done_h = (start_ms - j.arrival_ms) / step_ms * step_s / 3600.0
        if done_h < j.duration_h - 1e-9:
            out.append(replace(j, arrival_ms=int(start_ms), duration_h=j.duration_h - done_h,
                               start_hour=utc_hour(step_start_ms(start_ms, step_s * 1000))))
    return tuple(out)
