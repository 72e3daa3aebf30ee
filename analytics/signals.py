"""The metric vocabulary Tidelens recognises without configuration.

One catalogue shared by the simulator (which writes these names), the timelines (which read
them), live pulls (which ask a server for them) and ``tidelens signals`` (which reports what a
store has and what each missing signal costs). Names are the exporters' own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --- dcgm-exporter (per GPU, or per MIG instance with GPU_I_PROFILE / GPU_I_ID) -------------
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent 0-100; not reported for MIG instances
DCGM_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0-1; the MIG-safe activity
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # C
DCGM_SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz


# --- vLLM (current names; the deprecated spellings are aliases below) -----------------------
VLLM_TTFT = "vllm:time_to_first_token_seconds"  # histogram
VLLM_E2E = "vllm:e2e_request_latency_seconds"  # histogram
VLLM_SUCCESS = "vllm:request_success_total"  # counter, label finished_reason
VLLM_RUNNING = "vllm:num_requests_running"  # gauge
VLLM_WAITING = "vllm:num_requests_waiting"  # gauge
# vLLM's own bucket boundaries (vllm/engine/metrics.py), in seconds.
VLLM_TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                       1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_E2E_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                      50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)

# --- generic HTTP services (OpenTelemetry / prometheus conventions) -------------------------
HTTP_DURATION = "http_server_request_duration_seconds"  # histogram; label service
HTTP_DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5,
                           0.75, 1.0, 2.5, 5.0, 10.0)

# --- Triton / TGI / KServe (recognised; the simulator does not write them) ------------------
TRITON_SUCCESS = "nv_inference_request_success"
TRITON_QUEUE_US = "nv_inference_queue_duration_us"
TRITON_SUMMARY_US = "nv_inference_request_summary_us"  # summary (quantile label) when enabled
TGI_DURATION = "tgi_request_duration"
KSERVE_DURATION = "request_predict_seconds"

# --- kube-state-metrics -------------------------------------------------------------------
KSM_HPA_DESIRED = "kube_horizontalpodautoscaler_status_desired_replicas"  # label horizontalpodautoscaler
KSM_HPA_CURRENT = "kube_horizontalpodautoscaler_status_current_replicas"
KSM_DEPLOY_READY = "kube_deployment_status_replicas_ready"  # label deployment
KSM_DEPLOY_AVAILABLE = "kube_deployment_status_replicas_available"  # label deployment
# labels horizontalpodautoscaler, namespace, scaletargetref_kind, scaletargetref_name (value 1)
KSM_HPA_INFO = "kube_horizontalpodautoscaler_info"
KEDA_HPA_PREFIX = "keda-hpa-"  # KEDA names the HPA of ScaledObject X "keda-hpa-X"
KSM_POD_PHASE = "kube_pod_status_phase"  # labels namespace, pod, phase; value 1 for the phase
KSM_POD_INFO = "kube_pod_info"  # labels namespace, pod, node, created_by_name, priority_class
KSM_POD_GPU_REQUEST = "kube_pod_container_resource_requests"  # resource="nvidia_com_gpu"
KSM_NODE_GPU_ALLOCATABLE = "kube_node_status_allocatable"  # resource="nvidia_com_gpu"
KSM_GPU_RESOURCE = "nvidia_com_gpu"

# --- Kueue ----------------------------------------------------------------------------------
KUEUE_PENDING = "kueue_pending_workloads"  # labels cluster_queue, status
KUEUE_ADMITTED = "kueue_admitted_workloads_total"  # counter, label cluster_queue
KUEUE_EVICTED = "kueue_evicted_workloads_total"  # counter, labels cluster_queue, reason
KUEUE_ADMITTED_ACTIVE = "kueue_admitted_active_workloads"  # gauge

# --- KAI scheduler (fractional GPUs) ----------------------------------------------------------


@dataclass(frozen=True)
class Signal:
    """One thing an analysis needs, the metrics that can provide it, and what its absence costs."""

    name: str
    metrics: tuple[str, ...]
    needed_for: str
    cost_if_missing: str
    aliases: tuple[str, ...] = field(default_factory=tuple)


SIGNALS: tuple[Signal, ...] = (
    Signal("gpu_holders", (DCGM_GPU_UTIL, DCGM_GR_ENGINE_ACTIVE, DCGM_FB_USED),
           "who held which GPU each step (pool timeline)",
           "no pool timeline: batch contention cannot be measured"),
    Signal("gpu_activity", (DCGM_GR_ENGINE_ACTIVE, DCGM_GPU_UTIL),
           "active vs allocated utilisation", "only allocation is shown, not activity"),
    Signal("gpu_memory", (DCGM_FB_USED,), "memory used per GPU", "memory columns are empty"),
    Signal("request_latency", (VLLM_TTFT, VLLM_E2E, HTTP_DURATION, TRITON_QUEUE_US,
                               TGI_DURATION, KSERVE_DURATION, TRITON_SUMMARY_US),
           "p50/p95/p99 per service (service timeline)",
           "no tail events: nothing to attribute"),
    Signal("request_rate", (VLLM_SUCCESS, HTTP_DURATION, TRITON_SUCCESS),
           "traffic per service", "surges cannot be separated from contention"),
    Signal("autoscaler", (KSM_HPA_DESIRED, KSM_HPA_CURRENT, KSM_DEPLOY_READY, KSM_DEPLOY_AVAILABLE, KSM_HPA_INFO),
           "desired vs ready replicas",
           "capacity the autoscaler wanted is unknown: scaling lag cannot be told apart"),
    Signal("pod_gpu_requests", (KSM_POD_GPU_REQUEST, KSM_NODE_GPU_ALLOCATABLE),
           "which GPUs are free vs held by unlabelled devices",
           "devices without pod labels count as unknown, never idle"),
    Signal("queue", (KUEUE_PENDING, KUEUE_ADMITTED, KUEUE_EVICTED),
           "pending and admitted batch workloads", "batch admission times come from GPU labels only"),
    Signal("in_flight", (VLLM_RUNNING, VLLM_WAITING), "running/waiting requests",
           "queue depth is not shown"),
)

# Deprecated or alternative spellings seen in the wild -> the canonical name above.
METRIC_ALIASES: dict[str, str] = {
    "vllm:e2e_request_latency_seconds": VLLM_E2E,
    "vllm_e2e_request_latency_seconds": VLLM_E2E,
    "vllm_time_to_first_token_seconds": VLLM_TTFT,
    "vllm:request_success": VLLM_SUCCESS,
    "vllm_request_success_total": VLLM_SUCCESS,
    "vllm_num_requests_running": VLLM_RUNNING,
    "vllm_num_requests_waiting": VLLM_WAITING,
    "kube_hpa_status_desired_replicas": KSM_HPA_DESIRED,
    "kube_hpa_status_current_replicas": KSM_HPA_CURRENT,
    "http_server_duration_seconds": HTTP_DURATION,
    "http_request_duration_seconds": HTTP_DURATION,  # prometheus client middlewares' classic name
    "vllm_request_success": VLLM_SUCCESS,
}

_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def canonical_metric(name: str) -> str:
    """Return the canonical spelling of a metric name.

    dcgm-exporter field names are upper case; some deployments lower-case them.

    >>> canonical_metric("dcgm_fi_dev_gpu_util")
    'DCGM_FI_DEV_GPU_UTIL'
    >>> canonical_metric("vllm_request_success_total")
    'vllm:request_success_total'
    >>> canonical_metric("vllm_time_to_first_token_seconds_bucket")
    'vllm:time_to_first_token_seconds_bucket'
    """
    if name[:7].lower() == "dcgm_fi":
        return name.upper()
    if name in METRIC_ALIASES:
        return METRIC_ALIASES[name]
    for suffix in _HISTOGRAM_SUFFIXES:  # a histogram's series under a deprecated family name
        if name.endswith(suffix) and name[: -len(suffix)] in METRIC_ALIASES:
            return METRIC_ALIASES[name[: -len(suffix)]] + suffix
    return name
