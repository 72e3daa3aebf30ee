"""Kueue's objects for each policy (``kueue.x-k8s.io/v1beta2``, served from Kueue v0.15): the
GPU flavors, ClusterQueues in one cohort (``spec.cohortName``) with nominal quotas, borrowing
and lending limits and the preemption the policy models, a LocalQueue in each team namespace
that may hold one, and the batch window's switches; with the MIG and time-slicing device configs
(an ``nvidia-mig-parted`` config in a ConfigMap selected by the ``nvidia.com/mig.config`` node
label, for the device plugin's ``mixed`` strategy; the device plugin's ``sharing.timeSlicing``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.errors import ConfigError
from analytics.plan.objects import GPU, cluster_queue, config_map, flavor, local_queue, quota
from analytics.plan.windows import window

MIG_CONFIG = "tidelens-inference"
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


def _shared(p: Pool, policy: str) -> Part:
    import yaml

    part = Part(flavors=[flavor(p.gpu_flavor, p.product)])
    per_gpu = int(p.scn.pool.timeslice_replicas) if policy == "timeslice" else 1
    part.queues.append(cluster_queue("gpu-pool", p.gpu_flavor, quota(GPU, p.gpus * per_gpu), cohort=False))
    part.local.extend(local_queue(ns, "gpu-pool")
                      for ns in [*([p.inference_home] if p.inference_home else []), *p.batch_homes])
    part.numbers["quota_units"] = "time-sliced GPU replicas" if per_gpu > 1 else "GPUs"
    part.notes.append("30-kueue-clusterqueues.yaml: one queue for every team, first come first served "
                      + ("(time-sliced: the quota counts replicas, pods per GPU x GPUs)" if per_gpu > 1
                         else "(what a shared pool is without Tidelens: written so the queues exist)"))
    if policy == "timeslice":
        part.numbers["timeslice_replicas"] = per_gpu
        config = {"version": "v1", "flags": {"migStrategy": "none"},
                  "sharing": {"timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                              "resources": [{"name": GPU, "replicas": per_gpu}]}}}
        part.files["70-device-plugin-timeslicing.yaml"] = [config_map(
            "tidelens-time-slicing", "gpu-operator", "tidelens", yaml.safe_dump(config, sort_keys=False))]
        part.notes.append(f"70-device-plugin-timeslicing.yaml: the NVIDIA device plugin advertises each GPU "
                          f"as {per_gpu}, once the GPU Operator's device plugin reads this ConfigMap: "
                          "`helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values "
                          "--set devicePlugin.config.name=tidelens-time-slicing "
                          "--set devicePlugin.config.default=tidelens`")
    return part


def _cohort(p: Pool, policy: str) -> Part:
    """polite, preemption, tidal: inference and batch queues lending to each other."""
    pool = p.scn.pool
    part = Part(flavors=[flavor(p.gpu_flavor, p.product)])
    preempt = policy in ("preemption", "tidal")
    part.queues.append(cluster_queue("inference", p.gpu_flavor, quota(GPU, p.reserved), cohort=True,
                                     preemption=RECLAIM if preempt else None))
    part.queues.append(cluster_queue("batch", p.gpu_flavor, quota(GPU, p.gpus - p.reserved), cohort=True))
    part.homes(p, "inference", "batch")
    part.notes.append(f"30-kueue-clusterqueues.yaml: inference owns {p.reserved} GPUs nominally, batch the "
                      f"other {p.gpus - p.reserved}; each borrows what the other leaves unused"
                      + ("; inference reclaims its quota by preempting lower-priority batch"
                         if preempt else "; nothing is preempted (polite)"))
    if policy == "polite":
        start = min((j.start_hour for j in p.scn.batch.jobs), default=pool.tidal_start_hour)
        part.windows = window(pool.polite_release_hour, start, p.timezone, p.image)
        part.numbers.update(release_hour=float(pool.polite_release_hour), open_hour=float(start))
    elif policy == "tidal":
        part.windows = window(pool.tidal_end_hour, pool.tidal_start_hour, p.timezone, p.image)
        part.numbers.update(release_hour=float(pool.tidal_end_hour), open_hour=float(pool.tidal_start_hour))
    return part


def _partitioned(p: Pool) -> Part:
    soft = int(round(p.scn.pool.split_b * p.gpus))
    spot = p.gpus - p.reserved - soft
    spot_flavor = f"{p.gpu_flavor}-spot"
    part = Part(flavors=[flavor(p.gpu_flavor, p.product),
                         flavor(spot_flavor, {**p.product, "tidelens.io/capacity": "spot"})])
    part.queues += [
        cluster_queue("inference", p.gpu_flavor, quota(GPU, p.reserved, lending=0, borrowing=soft),
                      cohort=True, preemption=RECLAIM),
        cluster_queue("soft-shared", p.gpu_flavor, quota(GPU, soft), cohort=True),
        cluster_queue("batch", spot_flavor, quota(GPU, spot, borrowing=0, lending=0), cohort=True)]
    part.homes(p, "inference", "batch")
    part.numbers.update(class_a_gpus=p.reserved, class_b_gpus=soft, class_c_gpus=spot,
                        inference_borrowing_limit=soft)
    part.notes.append(f"30-kueue-clusterqueues.yaml: class A, {p.reserved} GPUs inference never lends; "
                      f"class B, {soft} soft-shared GPUs inference may borrow; class C, {spot} spot GPUs "
                      "batch neither borrows beyond nor lends")
    return part


def _mig(p: Pool) -> Part:
    import yaml

    from analytics.plan.names import k8s_name
    from analytics.whatif.policies import capacity

    pool = p.scn.pool
    layout = capacity(p.scn, "mig").layout  # the placement the what-if modelled
    if layout is None:
        raise ConfigError(f"pool.gpu_model={pool.gpu_model!r}: no MIG layout fits the service; choose "
                          "another GPU model or policy")
    profile, per_gpu = layout.profile.name, int(layout.instances)
    mig_resource = f"nvidia.com/mig-{profile}"
    mig_flavor = f"mig-{k8s_name(profile)}"
    part = Part(flavors=[flavor(p.gpu_flavor, p.product),
                         flavor(mig_flavor, {**p.product, "nvidia.com/mig.config": MIG_CONFIG})])
    part.queues += [cluster_queue("inference", mig_flavor, quota(mig_resource, p.reserved * per_gpu),
                                  cohort=True, preemption=RECLAIM),
                    cluster_queue("batch", p.gpu_flavor, quota(GPU, p.gpus - p.reserved), cohort=True)]
    part.homes(p, "inference", "batch")
    part.windows = window(pool.tidal_end_hour, pool.tidal_start_hour, p.timezone, p.image)
    mig_config = {"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        MIG_CONFIG: [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: per_gpu}}]}}
    part.files["80-mig-parted.yaml"] = [config_map("tidelens-mig-parted", "gpu-operator", "config.yaml",
                                                   yaml.safe_dump(mig_config, sort_keys=False))]
    part.numbers.update(mig_profile=profile, mig_instances_per_gpu=per_gpu,
                        inference_mig_instances=p.reserved * per_gpu, mig_strategy="mixed",
                        release_hour=float(pool.tidal_end_hour), open_hour=float(pool.tidal_start_hour),
                        resplit_drain_min=float(pool.mig_resplit_drain_min))
    part.notes.append(f"30-kueue-clusterqueues.yaml: inference on {p.reserved * per_gpu} {mig_resource} "
                      f"instances ({p.reserved} GPUs x {per_gpu}), batch on the other {p.gpus - p.reserved} "
                      "whole GPUs")
    part.notes.append(f"80-mig-parted.yaml: label the {p.reserved} inference GPUs' nodes "
                      f"nvidia.com/mig.config={MIG_CONFIG} (the rest all-disabled); the device plugin in "
                      f"mixed strategy then offers {mig_resource}; re-splitting drains a node first "
                      f"(modelled: {pool.mig_resplit_drain_min:g} min a GPU). The GPU Operator must use "
                      "the mixed strategy and this config, or the resource never appears: `helm upgrade "
                      "gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values --set "
                      "mig.strategy=mixed --set migManager.config.name=tidelens-mig-parted`")
    return part


def kueue_part(p: Pool, policy: str) -> Part:
    """The Kueue objects (and device configs) of ``policy`` for pool ``p``."""
    if policy in ("shared", "timeslice"):
        return _shared(p, policy)
    if policy in ("polite", "preemption", "tidal"):
        return _cohort(p, policy)
    if policy == "partitioned":
        return _partitioned(p)
    return _mig(p)
