"""The Kubernetes objects a plan is made of, one builder each: Kueue's (ResourceFlavor,
ClusterQueue, LocalQueue, WorkloadPriorityClass), the ConfigMap of a device config, and the
metadata every object shares.

Every builder returns a plain dict that :func:`analytics.plan.write.dump_yaml` serialises; no
manifest is ever built as text, so no name or label can add a key. Every name passes
:func:`analytics.plan.names.is_k8s_name` on the way in (a name that fails is a bug in the plan,
never in the input: the input's names were mapped by :func:`analytics.plan.names.map_teams`).
"""

from __future__ import annotations

from typing import Any

from analytics.plan.names import is_k8s_name

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
COHORT = "tidelens-pool"
INFERENCE_PRIORITY = ("inference-high", 1000)
TRAINING_PRIORITY = ("training-low", 100)
MANAGED_BY = {"app.kubernetes.io/managed-by": "tidelens"}


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    """An object's metadata: its name, its namespace if any, and Tidelens as its manager."""
    for value in (name, namespace):
        if value is not None and not is_k8s_name(value):
            raise ValueError(f"plan bug: {value!r} is not a DNS-1123 label")
    out: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        out["namespace"] = namespace
    return out


def flavor(name: str, node_labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": meta(name),
            "spec": {"nodeLabels": node_labels}}


def quota(name: str, nominal: int, *, borrowing: int | None = None,
          lending: int | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"name": name, "nominalQuota": int(nominal)}
    if borrowing is not None:
        r["borrowingLimit"] = int(borrowing)
    if lending is not None:
        r["lendingLimit"] = int(lending)
    return r


def cluster_queue(name: str, flavor_name: str, resource: dict[str, Any], *, cohort: bool,
                  preemption: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},  # any namespace: its LocalQueue decides which queue it uses
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [resource["name"]],
                            "flavors": [{"name": flavor_name, "resources": [resource]}]}],
        "stopPolicy": "None",
    }
    if cohort:
        spec["cohortName"] = COHORT
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": meta(name), "spec": spec}


def local_queue(team_ns: str, cluster_queue_name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue",
            "metadata": meta(cluster_queue_name, team_ns), "spec": {"clusterQueue": cluster_queue_name}}


def priority(name: str, value: int, what: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": meta(name),
            "value": value, "description": what}


def priorities() -> list[dict[str, Any]]:
    """The two WorkloadPriorityClasses every Kueue plan writes."""
    return [priority(*INFERENCE_PRIORITY, "latency-critical inference: admitted first, may preempt training"),
            priority(*TRAINING_PRIORITY, "batch and training: admitted into what is free")]


def config_map(name: str, namespace: str, key: str, text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, namespace), "data": {key: text}}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name)}
