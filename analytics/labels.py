"""Label normalisation: one spelling per concept, decided once, on ingest.

Exporters and versions spell the same thing differently (``Hostname`` vs ``hostname``,
``exported_pod`` behind a ServiceMonitor, ``pod_name`` in older cAdvisor-style setups).
The store keeps every raw label and adds these normalised columns beside them.
"""

from __future__ import annotations

# Normalised column -> raw label names, in order of preference (first present wins).
# ``exported_*`` wins over the plain name: behind a ServiceMonitor the plain ``pod`` is the
# exporter's own pod, and the workload's pod moved to ``exported_pod``.
NORMALISED_LABELS: dict[str, tuple[str, ...]] = {
    "gpu": ("gpu", "minor_number", "gpu_index"),
    "uuid": ("UUID", "uuid", "gpu_uuid", "device_uuid"),
    "hostname": ("Hostname", "hostname", "node", "kubernetes_node", "instance"),
    "model": ("modelName", "model_name_gpu", "gpu_model"),
    "namespace": ("exported_namespace", "namespace", "podnamespace", "pod_namespace"),
    # dcgm-exporter's Slurm job (hpc_job) and Tidelens' NVML collector's local process name a
    # GPU's holder where no pod does (a bare-metal or Slurm host): the workload map reads them as pods
    "pod": ("exported_pod", "pod", "podname", "pod_name", "hpc_job", "process"),
    "container": ("exported_container", "container", "container_name"),
    "mig_profile": ("GPU_I_PROFILE", "gpu_i_profile", "mig_profile"),
    "mig_id": ("GPU_I_ID", "gpu_i_id", "mig_id"),
}

NORMALISED_COLUMNS: tuple[str, ...] = tuple(NORMALISED_LABELS)


def normalise_labels(labels: dict[str, str]) -> dict[str, str | None]:
    """Map raw labels to the normalised columns (``None`` where no spelling is present).

    Empty values count as absent: Prometheus treats ``pod=""`` as no label.

    >>> normalise_labels({"Hostname": "n1", "exported_pod": "train-0", "pod": "dcgm-x"})["pod"]
    'train-0'
    >>> normalise_labels({"hostname": "n2"})["hostname"]
    'n2'
    """
    out: dict[str, str | None] = {}
    for column, spellings in NORMALISED_LABELS.items():
        value = None
        for spelling in spellings:
            v = labels.get(spelling)
            if v:
                value = v
                break
        out[column] = value
    return out
