"""The MIG policy's objects: inference on MIG instances of the layout the what-if modelled, batch on
whole GPUs, and the ``nvidia-mig-parted`` config (a ConfigMap selected by the ``nvidia.com/mig.config``
node label, for the device plugin's ``mixed`` strategy)."""

from __future__ import annotations

from analytics.errors import ConfigError
from analytics.plan.names import k8s_name
from analytics.plan.objects import GPU, cluster_queue, config_map, flavor, quota
from analytics.plan.part import RECLAIM, Part, Pool
from analytics.plan.windows import window
from analytics.whatif.policies import capacity

MIG_CONFIG = "tidelens-inference"


def mig_part(p: Pool) -> Part:
    """Inference on MIG instances, batch on the other GPUs, the tidal window and the MIG config."""
    import yaml


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
