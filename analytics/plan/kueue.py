"""Kueue's objects for each policy (``kueue.x-k8s.io/v1beta2``, served from Kueue v0.15): the
GPU flavors, ClusterQueues in one cohort (``spec.cohortName``) with nominal quotas, borrowing
and lending limits and the preemption the policy models, a LocalQueue in each team namespace
that may hold one, and the batch window's switches. The MIG policy's objects are
:mod:`analytics.plan.migparted`'s, time-slicing's device config :mod:`analytics.plan.timeslice`'s."""

from __future__ import annotations

from analytics.plan.migparted import mig_part
from analytics.plan.objects import GPU, cluster_queue, flavor, local_queue, quota
from analytics.plan.part import RECLAIM, Part, Pool
from analytics.plan.timeslice import add_timeslicing
from analytics.plan.windows import window

__all__ = ["Part", "Pool", "kueue_part"]


def _shared(p: Pool, policy: str) -> Part:
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
        add_timeslicing(part, per_gpu)
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


def kueue_part(p: Pool, policy: str) -> Part:
    """The Kueue objects (and device configs) of ``policy`` for pool ``p``."""
    if policy in ("shared", "timeslice"):
        return _shared(p, policy)
    if policy in ("polite", "preemption", "tidal"):
        return _cohort(p, policy)
    if policy == "partitioned":
        return _partitioned(p)
    return mig_part(p)
