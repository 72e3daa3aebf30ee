"""What every policy's objects are made from: the pool a plan is for (:class:`Pool`) and one
policy's part of the plan (:class:`Part`: flavors, queues, LocalQueues, batch windows, device
configs, notes and numbers), with the preemption the reclaiming policies use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.plan.objects import local_queue

RECLAIM = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"},
           "withinClusterQueue": "LowerPriority"}


@dataclass
class Pool:
    """What a policy's objects need to know: the pool, the reservation, where queues live."""

    scn: Any
    gpus: int
    reserved: int
    gpu_flavor: str
    product: dict[str, str]
    inference_home: str | None  # the inference team's namespace, None when it may hold no queue
    batch_homes: list[str]  # the batch teams' namespaces that may hold a queue
    timezone: str
    image: str


@dataclass
class Part:
    """A policy's Kueue objects, what they enforce, and the numbers they carry."""

    flavors: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    local: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # device configs
    notes: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def homes(self, p: Pool, inference: str, batch: str) -> None:
        """A LocalQueue for inference's queue and one per batch namespace for batch's."""
        if p.inference_home:
            self.local.append(local_queue(p.inference_home, inference))
        self.local.extend(local_queue(ns, batch) for ns in p.batch_homes)
