"""Save and load a ``PoolScenario`` as TOML, so a what-if can be shared and replayed."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import tomli_w

from analytics.config import parse_toml
from analytics.errors import ConfigError
from analytics.whatif.params import BatchJob, BatchParams, PoolParams, PoolScenario, ServiceParams


def _plain(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def scenario_to_toml(s: PoolScenario) -> str:
    """The scenario as TOML text (traffic as one array of req/s per step)."""
    doc: dict[str, Any] = {
        "name": s.name,
        "description": s.description,
        "start_ts_ms": int(s.start_ts_ms),
        "step_s": int(s.step_s),
        "traffic_rps": [float(v) for v in s.traffic_rps.tolist()],
        **({"others_gpus": [float(v) for v in s.others_gpus.tolist()]} if s.others_gpus is not None else {}),
        "service": _plain(s.service),
        "pool": _plain(s.pool),
        "batch": {"jobs": [_plain(j) for j in s.batch.jobs]},
        "provenance": dict(s.provenance),
    }
    return tomli_w.dumps(doc)


def _build(cls: type, table: Any, where: str) -> Any:
    if not isinstance(table, dict):
        raise ConfigError(f"scenario TOML: [{where}] must be a table")
    known = {f.name: f for f in fields(cls)}
    if cls is PoolParams and "split_a" in table:
        raise ConfigError(f"scenario TOML: [{where}] split_a (a share of the pool) was replaced by "
                          "reservation_gpus (GPUs the inference class owns; -1 = what the peak needed "
                          "plus headroom): write reservation_gpus = round(split_a x gpus)")
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"scenario TOML: [{where}] has unknown key(s) {', '.join(unknown)}; "
                          f"known: {', '.join(known)}")
    kwargs = {}
    for k, v in table.items():
        default = known[k].default
        if isinstance(default, bool) and not isinstance(v, bool):
            raise ConfigError(f"scenario TOML: {where}.{k} = {v!r} must be true or false")
        if isinstance(default, float) and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if isinstance(default, (int, float)) and not isinstance(default, bool) \
                and not isinstance(v, (int, float)):
            raise ConfigError(f"scenario TOML: {where}.{k} = {v!r} must be a number")
        kwargs[k] = v
    return cls(**kwargs)


def scenario_from_toml(text: str) -> PoolScenario:
    """Parse TOML from ``scenario_to_toml`` (or by hand); ``ConfigError`` on bad input."""
    doc = parse_toml(text, "scenario TOML")
    top = {"name", "description", "start_ts_ms", "step_s", "traffic_rps", "others_gpus", "service",
           "pool", "batch", "provenance"}
    unknown = sorted(set(doc) - top)
    if unknown:
        raise ConfigError(f"scenario TOML: unknown top-level key(s) {', '.join(unknown)}")
    if "traffic_rps" not in doc:
        raise ConfigError("scenario TOML: traffic_rps is missing; give one req/s value per step")
    jobs_raw = doc.get("batch", {}).get("jobs", [])
    jobs = tuple(_build(BatchJob, j, f"batch.jobs[{i}]") for i, j in enumerate(jobs_raw))
    scn = PoolScenario(
        traffic_rps=np.asarray(doc["traffic_rps"], dtype=np.float64),
        others_gpus=np.asarray(doc["others_gpus"], dtype=np.float64) if "others_gpus" in doc else None,
        start_ts_ms=int(doc.get("start_ts_ms", 0)),
        step_s=int(doc.get("step_s", 60)),
        service=_build(ServiceParams, doc.get("service", {}), "service"),
        batch=BatchParams(jobs=jobs),
        pool=_build(PoolParams, doc.get("pool", {}), "pool"),
        name=str(doc.get("name", "custom")),
        description=str(doc.get("description", "")),
        provenance={str(k): str(v) for k, v in doc.get("provenance", {}).items()},
    )
    scn.validate()
    return scn
