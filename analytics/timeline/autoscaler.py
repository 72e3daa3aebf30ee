"""Which service each autoscaler scales: HPAs and Deployments linked the way clusters name them.

kube-state-metrics names an HPA's series after the HPA (``horizontalpodautoscaler``) and a
Deployment's after the Deployment (``deployment``); neither names the service whose latency we
read (its pods' workload, or its ``service`` label). Real clusters rarely name all three alike
(``chat-api`` scales ``chat-api-vllm``; KEDA calls its HPA ``keda-hpa-<ScaledObject>``), so an
HPA is linked to a service by the first of these rules that decides:

1. the user's ``[[autoscaler]]`` rule in ``tidelens.toml`` (:class:`analytics.workloads.AutoscalerRule`);
2. ``kube_horizontalpodautoscaler_info{scaletargetref_kind, scaletargetref_name}``: the HPA's
   own scale target, matched to the service whose pods belong to it (or so named);
3. the same name as the service or one of its pods' workloads (in the same namespace);
4. KEDA's naming: ``keda-hpa-<ScaledObject>``, the ScaledObject's name then matched as 3 and 5;
5. a name that is a prefix of the service's (or the reverse) at a name boundary (``-``, ``.``,
   ``_``) in the same namespace; the longest match wins, a tie is listed as ambiguous;
6. the only HPA in a namespace with one service no other rule linked.

An HPA whose scale target is known but is no service here is ``unlinked`` (it scales something
else); two HPAs linked to one service by equally strong rules are both ``ambiguous`` and give the
service no desired replicas. A Deployment gives a service its ready replicas
(``kube_deployment_status_replicas_ready``, else ``_available``) when it is a linked HPA's
scale target or the service's pods' workload.

>>> svc = [ServiceTargets("chat-api-vllm", "llm", ("chat-api-vllm",))]
>>> [(x.service, x.rule) for x in link_hpas([Hpa("llm", "chat-api")], svc)]
[('chat-api-vllm', 'name prefix')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import polars as pl

from analytics import signals as sg
from analytics.workloads import AutoscalerRule

RULE_USER = "tidelens.toml"
RULE_INFO = "kube_horizontalpodautoscaler_info scale target"
RULE_SAME = "same name"
RULE_KEDA_SAME = "KEDA ScaledObject, same name"
RULE_KEDA_PREFIX = "KEDA ScaledObject, name prefix"
RULE_PREFIX = "name prefix"
RULE_ONLY = "only HPA in the namespace"
# Strength of each rule, for two HPAs that claim one service (lower wins).
_RANK = {RULE_USER: 0, RULE_INFO: 1, RULE_SAME: 2, RULE_KEDA_SAME: 2, RULE_KEDA_PREFIX: 3, RULE_PREFIX: 3,
         RULE_ONLY: 4}
_BOUNDARY = "-._"

LINK_SCHEMA = {"kind": pl.Utf8, "namespace": pl.Utf8, "name": pl.Utf8, "service": pl.Utf8, "target": pl.Utf8,
               "rule": pl.Utf8, "status": pl.Utf8, "note": pl.Utf8}


@dataclass(frozen=True)
class Hpa:
    """One HPA as the store names it, with its scale target when ``_info`` says."""

    namespace: str | None
    name: str
    target_kind: str | None = None
    target_name: str | None = None


@dataclass(frozen=True)
class ServiceTargets:
    """A service and the names an autoscaler may know it by: its own and its pods' workloads."""

    service: str
    namespace: str | None
    names: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """What one HPA or Deployment was linked to, and why (``status``: linked, ambiguous, unlinked)."""

    kind: str
    namespace: str | None
    name: str
    service: str | None
    rule: str | None
    status: str
    target: str | None = None
    note: str = ""
    candidates: tuple[str, ...] = field(default=())


def _boundary_prefix(short: str, long: str) -> bool:
    return long.startswith(short) and len(long) > len(short) and long[len(short)] in _BOUNDARY


def _by_name(name: str, services: Sequence[ServiceTargets]) -> tuple[str, list[str]]:
    """``(rule, services)`` a name matches: exactly, else by the longest boundary prefix."""
    exact = sorted({s.service for s in services if name in s.names})
    if exact:
        return "same", exact
    best, hits = 0, set()
    for s in services:
        for n in s.names:
            if _boundary_prefix(name, n) or _boundary_prefix(n, name):
                score = min(len(n), len(name))
                if score > best:
                    best, hits = score, {s.service}
                elif score == best:
                    hits.add(s.service)
    return "prefix", sorted(hits)


def _same_ns(ns: str | None, services: Sequence[ServiceTargets]) -> list[ServiceTargets]:
    return [s for s in services if ns is None or s.namespace is None or s.namespace == ns]


def _decide(h: Hpa, services: Sequence[ServiceTargets], rules: Sequence[AutoscalerRule]) -> Link:
    def link(service: str, rule: str, target: str | None = None, note: str = "") -> Link:
        return Link("hpa", h.namespace, h.name, service, rule, "linked", target=target, note=note)

    def none(status: str, note: str, candidates: Sequence[str] = (), target: str | None = None) -> Link:
        return Link("hpa", h.namespace, h.name, None, None, status, target=target, note=note,
                    candidates=tuple(candidates))

    for r in rules:
        if r.matches(h.name, h.namespace):
            if any(s.service == r.service for s in services):
                return link(r.service, RULE_USER, note=r.name)
            return none("unlinked", f"{r.name}: no service {r.service!r} in the store")
    local = _same_ns(h.namespace, services)
    if h.target_name:
        hits = sorted({s.service for s in local if h.target_name in s.names})
        target = f"{h.target_kind or 'Deployment'}/{h.target_name}"
        if len(hits) == 1:
            return link(hits[0], RULE_INFO, target=target)
        if hits:
            return none("ambiguous", f"scale target {target} is the workload of several services", hits, target)
        return none("unlinked", f"scales {target}, which serves none of the store's latency series", target=target)
    name, keda = h.name, False
    if name.startswith(sg.KEDA_HPA_PREFIX) and len(name) > len(sg.KEDA_HPA_PREFIX):
        name, keda = name[len(sg.KEDA_HPA_PREFIX):], True
    how, hits = _by_name(name, local)
    if len(hits) == 1:
        rule = {("same", False): RULE_SAME, ("same", True): RULE_KEDA_SAME,
                ("prefix", False): RULE_PREFIX, ("prefix", True): RULE_KEDA_PREFIX}[(how, keda)]
        return link(hits[0], rule)
    if hits:
        return none("ambiguous", f"{'ScaledObject ' if keda else ''}{name!r} matches "
                    f"{', '.join(hits)} equally well; add an [[autoscaler]] rule to tidelens.toml", hits)
    return none("unlinked", "no service of this namespace is named like it")


def link_hpas(hpas: Sequence[Hpa], services: Sequence[ServiceTargets],
              rules: Sequence[AutoscalerRule] = ()) -> list[Link]:
    """Link each HPA to the service it scales (rules in the module docstring).

    >>> svc = [ServiceTargets("a-vllm", "ns", ("a-vllm",)), ServiceTargets("b-vllm", "ns", ("b-vllm",))]
    >>> [(x.name, x.service, x.rule) for x in link_hpas([Hpa("ns", "keda-hpa-b-vllm"), Hpa("ns", "a")], svc)]
    [('keda-hpa-b-vllm', 'b-vllm', 'KEDA ScaledObject, same name'), ('a', 'a-vllm', 'name prefix')]
    """
    out = [_decide(h, services, rules) for h in hpas]
    # 6. the only HPA of a namespace, for the one service there that nothing linked
    taken = {x.service for x in out if x.status == "linked"}
    for i, (h, x) in enumerate(zip(hpas, out)):
        said = h.target_name is not None or any(r.matches(h.name, h.namespace) for r in rules)
        if x.status != "unlinked" or said:
            continue
        same_ns = [h for h in hpas if h.namespace == x.namespace]
        free = sorted({s.service for s in services if s.namespace == x.namespace and s.service not in taken})
        if len(same_ns) == 1 and len(free) == 1:
            out[i] = Link("hpa", x.namespace, x.name, free[0], RULE_ONLY, "linked")
            taken.add(free[0])
        elif len(same_ns) == 1 and len(free) > 1:
            out[i] = Link("hpa", x.namespace, x.name, None, None, "ambiguous",
                          note="the only HPA in its namespace, which has several services; add an "
                               "[[autoscaler]] rule to tidelens.toml", candidates=tuple(free))
    # two HPAs on one service: the stronger rule keeps it; equally strong ones lose it both
    by_service: dict[str, list[int]] = {}
    for i, x in enumerate(out):
        if x.status == "linked" and x.service is not None:
            by_service.setdefault(x.service, []).append(i)
    for service, idx in by_service.items():
        if len(idx) < 2:
            continue
        best = min(_RANK[out[i].rule or ""] for i in idx)
        winners = [i for i in idx if _RANK[out[i].rule or ""] == best]
        for i in idx:
            if len(winners) == 1 and i == winners[0]:
                continue
            others = ", ".join(out[j].name for j in idx if j != i)
            x = out[i]
            out[i] = Link("hpa", x.namespace, x.name, None, None, "ambiguous", target=x.target,
                          note=f"{service} is also scaled by {others} ({'a stronger' if i not in winners else 'an equally strong'}"
                               f" rule); add an [[autoscaler]] rule to tidelens.toml", candidates=(service,))
    return out


def link_deployments(deployments: Sequence[tuple[str | None, str]], services: Sequence[ServiceTargets],
                     hpa_links: Sequence[Link]) -> list[Link]:
    """Link each Deployment to the service whose ready replicas it counts: a linked HPA's scale
    target, else the service whose pods' workload (or name) it is, in the same namespace."""
    targets = {(x.namespace, x.target.split("/", 1)[1]): x.service for x in hpa_links
               if x.status == "linked" and x.target and x.target.lower().startswith("deployment/")}
    out = []
    for ns, name in deployments:
        if (ns, name) in targets:
            out.append(Link("deployment", ns, name, targets[(ns, name)], RULE_INFO, "linked"))
            continue
        hits = sorted({s.service for s in _same_ns(ns, services) if name in s.names})
        if len(hits) == 1:
            out.append(Link("deployment", ns, name, hits[0], RULE_SAME, "linked"))
        elif hits:
            out.append(Link("deployment", ns, name, None, None, "ambiguous",
                            note=f"the workload of several services: {', '.join(hits)}", candidates=tuple(hits)))
        else:
            out.append(Link("deployment", ns, name, None, None, "unlinked",
                            note="no service's pods belong to it"))
    return out


def links_frame(links: Sequence[Link]) -> pl.DataFrame:
    """The links as a table (``kind, namespace, name, service, target, rule, status, note``)."""
    rows = [{"kind": x.kind, "namespace": x.namespace, "name": x.name, "service": x.service, "target": x.target,
             "rule": x.rule, "status": x.status,
             "note": x.note or (f"candidates: {', '.join(x.candidates)}" if x.candidates else "")} for x in links]
    return pl.DataFrame(rows, schema=LINK_SCHEMA).sort("kind", "namespace", "name", nulls_last=True)
