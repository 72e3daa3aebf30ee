"""Live pulls through the recording rules (:mod:`analytics.rules`), signal by signal.

Before a pull, one series lookup asks the server which of the rules' pool-level series it
holds over the range, and with which ``tidelens_map_digest``. A query of the timeline catalogue
whose recorded series carry this map's digest is read from them (the server sums GPUs by pool,
class, team and workload instead of returning one series per device and holder); any other
falls back to the raw query, and a digest of another map is said (the rules are stale: export
them again and backfill). The recorded answers land under the same names and labels as the raw
ones (GPU holdings under the rules' own names, which :mod:`analytics.timeline.from_rules` reads),
and each chunk's source name says ``q=rules:...``, so ``tidelens sources`` and the Data page
show by which path each signal came.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from analytics.errors import TidelensError
from analytics.live.client import PromClient
from analytics.promql import PullQuery, Scope, timeline_queries
from analytics.rules import compile as rc
from analytics.workloads import WorkloadMap

RULES_KEY = "rules:"  # the key (and so the source name's q=) of a query read from recorded series
# The pool timeline's holdings and device stats, read from the rules: (name, by, signal).
POOL_RECORDS: tuple[tuple[str, str, str], ...] = (
    (rc.GPUS, "pool, class, team, workload", "gpu_holders"),
    (rc.ACTIVITY_WEIGHTED, "pool", "gpu_activity"),
    (rc.ACTIVITY_WEIGHT, "pool", "gpu_activity"),
    (rc.FB_USED, "pool", "gpu_memory"),
)


@dataclass
class RulesPlan:
    """What a pull reads from the rules and what from raw series, and why."""

    queries: list[PullQuery]
    digest: str
    paths: dict[str, str] = field(default_factory=dict)  # query key of the raw catalogue -> "rules" | "raw"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"map_digest": self.digest, "paths": self.paths, "notes": self.notes}


def _found(client: PromClient, names: list[str], start_ms: int, end_ms: int) -> dict[str, set[str]]:
    """Recorded name -> the map digests its series carry over the range."""
    selector = '{__name__=~"%s", %s!=""}' % ("|".join(names), rc.DIGEST_LABEL)
    out: dict[str, set[str]] = {}
    for item in client.series(selector, start_ms, end_ms).data or []:
        if isinstance(item, dict) and isinstance(item.get("__name__"), str):
            out.setdefault(item["__name__"], set()).add(str(item.get(rc.DIGEST_LABEL, "")))
    return out


def rules_plan(client: PromClient, start_ms: int, end_ms: int, step_ms: int, wmap: WorkloadMap,
               scope: Scope | None = None, cfg: rc.RulesConfig = rc.RulesConfig()) -> RulesPlan:
    """The timeline catalogue with every query the rules record (for this map) read from them.

    Never raises for the lookup itself: a server that cannot say leaves every signal on the
    raw path, with a note.
    """
    scope = scope or Scope()
    raw = timeline_queries(step_ms, scope)
    digest = rc.map_digest(wmap, cfg)
    plan = RulesPlan(queries=raw, digest=digest, paths={q.key: "raw" for q in raw})
    if scope.matchers:
        plan.notes.append("a scoped pull reads raw series (the rules record the whole fleet)")
        return plan
    if step_ms % (cfg.interval_s * 1000):
        plan.notes.append(f"step {step_ms // 1000}s is not a multiple of the rules' {cfg.interval_s}s "
                          "interval: raw series")
        return plan
    recorded = {rec.key: rec for rec, _ in rc.signal_rules(cfg)}
    names = [n for n, _, _ in POOL_RECORDS] + [r.record for r in recorded.values()]
    try:
        found = _found(client, names, start_ms, end_ms)
    except TidelensError as exc:
        plan.notes.append(f"recorded series not looked up ({str(exc).splitlines()[0]}): raw series")
        return plan
    stale = sorted({d for ds in found.values() for d in ds} - {digest})
    if stale:
        plan.notes.append(f"the server's Tidelens recording rules were compiled from another map (digest "
                          f"{', '.join(stale)}; this map is {digest}): those series are ignored; "
                          "run `tidelens export rules` again, load it and backfill")
    window = f"[{step_ms - 1}ms]"
    # A step (t - step, t] is in the evaluations of [t, t + interval): the one at or after its
    # last scrape (Prometheus offsets a group's evaluations within the interval).
    shift = cfg.interval_s * 1000 - 1
    sel = f'{{{rc.DIGEST_LABEL}="{digest}"}}'
    out: list[PullQuery] = []
    pool_ok = all(digest in found.get(n, ()) for n, _, _ in POOL_RECORDS)
    for q in raw:
        rec = recorded.get(q.key)
        if q.key.startswith("dev:") and pool_ok:
            plan.paths[q.key] = "rules"
            continue
        if rec is not None and digest in found.get(rec.record, ()):
            fn, agg = ("sum_over_time", "sum") if rec.increase else ("last_over_time", "max")
            promql = f"{agg} without ({rc.DIGEST_LABEL}) ({fn}({rec.record}{sel}{window}))"
            out.append(replace(q, key=RULES_KEY + q.key, promql=promql, shift_ms=shift))
            plan.paths[q.key] = "rules"
        else:
            out.append(q)
    if pool_ok:
        out[:0] = [PullQuery(RULES_KEY + name, name, f"sum by ({by}) (last_over_time({name}{sel}{window}))", signal,
                             shift_ms=shift) for name, by, signal in POOL_RECORDS]
    elif any(digest in found.get(n, ()) for n, _, _ in POOL_RECORDS):
        plan.notes.append("some of the rules' GPU series are missing over the range: GPUs from raw series")
    plan.queries = out
    return plan
