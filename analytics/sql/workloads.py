"""SQL of the workload map: the distinct pods in the store and the labels rules match on.

Series-level only (one row per series, never per sample): label strings are fine here.
"""

from analytics import signals as sg
from analytics.signals import KSM_POD_INFO

# Request-latency histograms and summaries: a pod reporting one serves requests.
_LATENCY = ", ".join(f"'{m}_count'" for m in (sg.VLLM_TTFT, sg.VLLM_E2E, sg.HTTP_DURATION, sg.TGI_DURATION,
                                               sg.KSERVE_DURATION, sg.TRITON_SUMMARY_US))

# One row per (namespace, pod): its container, node, priority class and service label.
# The node comes from kube_pod_info or dcgm-exporter (a service's `instance` label is an address).
POD_LABELS = f"""
SELECT namespace, pod,
       min(container) AS container,
       coalesce(min(hostname) FILTER (WHERE metric = '{KSM_POD_INFO}'),
                min(hostname) FILTER (WHERE metric LIKE 'DCGM_FI_%')) AS hostname,
       min(json_extract_string(labels, '$.priority_class')) FILTER (WHERE metric = '{KSM_POD_INFO}') AS priority_class,
       min(coalesce(json_extract_string(labels, '$.exported_service'),
                    json_extract_string(labels, '$.service'))) AS service,
       min(json_extract_string(labels, '$.team')) AS team,
       CASE WHEN bool_or(metric IN ({_LATENCY})) THEN 'true' END AS serves
FROM series
WHERE pod IS NOT NULL
GROUP BY namespace, pod
ORDER BY namespace, pod
"""
