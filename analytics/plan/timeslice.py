"""The time-slicing policy's device config: the NVIDIA device plugin's ``sharing.timeSlicing``,
advertising each GPU as several replicas (a ConfigMap the GPU Operator's device plugin reads)."""

from __future__ import annotations

from analytics.plan.objects import GPU, config_map
from analytics.plan.part import Part


def add_timeslicing(part: Part, per_gpu: int) -> None:
    """Add the device plugin's time-slicing ConfigMap (``per_gpu`` replicas a GPU) and its note."""
    import yaml

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
