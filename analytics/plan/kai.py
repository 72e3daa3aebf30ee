"""The KAI Scheduler's queues (``scheduling.run.ai/v2``) of a policy: GPU quota, over-quota
weight and limit under one parent queue for the pool. KAI has no queue stop, so a batch window
is not enforced under KAI (the README says so)."""

from __future__ import annotations

from typing import Any

from analytics.plan.objects import COHORT, meta

KAI_API = "scheduling.run.ai/v2"


def kai_queue(name: str, gpu_quota: float, gpu_limit: float, *, weight: float = 1.0,
              parent: str | None = None, priority: int | None = None) -> dict[str, Any]:
    """A KAI Scheduler queue: GPUs by quota, over-quota weight and limit (-1: no quota or limit);
    CPU and memory left unlimited (the what-if models GPUs)."""
    free = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"cpu": dict(free), "memory": dict(free), "gpu": {
        "quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": KAI_API, "kind": "Queue", "metadata": meta(name), "spec": spec}


def kai_queues(policy: str, gpus: int, reserved: int, soft: int, *,
               replicas: int = 1) -> tuple[list[dict[str, Any]], str]:
    """The KAI queues of a policy, and what they enforce. Quotas count what the nodes advertise
    as ``nvidia.com/gpu``: under time-slicing the device plugin advertises ``replicas`` per GPU,
    and KAI counts each as a GPU, as Kueue's quota does (64 GPUs sliced 2 ways are 128)."""
    if policy in ("shared", "timeslice"):
        units = gpus * replicas
        return [kai_queue(COHORT, units, units), kai_queue("gpu-pool", units, units, parent=COHORT)], (
            "one queue under the pool's for every team: first come first served"
            + (f" (quota in time-sliced replicas: {gpus} GPUs x {replicas})" if replicas > 1 else ""))
    top = kai_queue(COHORT, gpus, gpus)
    if policy == "partitioned":
        return [top, kai_queue("inference", reserved, reserved + soft, parent=COHORT, priority=200, weight=0),
                kai_queue("soft-shared", soft, soft, parent=COHORT, weight=0),
                kai_queue("batch", gpus - reserved - soft, gpus - reserved - soft, parent=COHORT, weight=0)], (
            f"inference's quota {reserved} GPUs, its limit {reserved + soft} (class B as overflow); "
            f"batch limited to its {gpus - reserved - soft} (no over-quota weight: nobody borrows)")
    # polite, preemption, tidal, mig: inference owns its reservation and reclaims it (KAI
    # reclaims over-quota use for a queue under its quota); batch may use what is idle.
    return [top, kai_queue("inference", reserved, gpus, parent=COHORT, priority=200),
            kai_queue("batch", gpus - reserved, gpus, parent=COHORT, priority=100)], (
        f"inference's quota {reserved} GPUs, batch's {gpus - reserved}; either may run over quota "
        "on idle GPUs, and KAI reclaims it for a queue under its quota")
