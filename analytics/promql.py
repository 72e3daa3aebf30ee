"""The PromQL catalogue of live pulls, built from the metric names of :mod:`analytics.signals`.

Two catalogues, both reduced by the server:

- :func:`timeline_queries` (the default): what the pool and service timelines read, stored
  under the raw metric names so the timelines read a pull exactly as they read files --
  device series sampled per step with scrape labels dropped, histograms summed over pods by
  service (stored as running sums), small families sampled per step;
- :func:`fleet_queries`: compact ``tidelens:*`` aggregates (GPU counts and share-weighted sums
  per holder, the recording-rule convention ``level:metric:operation``) for fleets too large
  for per-device series.

Every query is exact on the store's step semantics, independent of the server's lookback and
of its (in Prometheus 2.x closed, in 3.x left-open) range boundaries:

- a gauge on a step is the last sample in ``(t - step, t]``: ``last_over_time(x[step - 1ms])``;
- a counter's increase on a step is the difference of the last samples of this step and the
  previous one (up to 5 minutes back), a reset counting the new value, a series new in the
  step counting 0 (no extrapolation, unlike ``increase()``).
"""

from __future__ import annotations

from dataclasses import dataclass

from analytics import signals as s
from analytics.errors import ConfigError
from analytics.workloads import _POD_SUFFIXES as rules

# The labels the workload map and the pool timeline read, in every spelling the store normalises.
HOLDER_LABELS: tuple[str, ...] = (
    "namespace", "exported_namespace", "pod", "exported_pod", "container", "exported_container",
    "Hostname", "hostname", "modelName", "GPU_I_PROFILE")
# A device: a GPU, or a MIG instance of it.
DEVICE_LABELS: tuple[str, ...] = ("UUID", "GPU_I_ID")
# A service's identity: its own label where exporters set one, else the pod's workload (below).
SERVICE_LABELS: tuple[str, ...] = (
    "namespace", "exported_namespace", "service", "model_name", "workload")
# Device-level metrics: any one of them proves a device exists and who holds it.
DEVICE_METRICS: tuple[str, ...] = (s.DCGM_FB_USED, s.DCGM_GR_ENGINE_ACTIVE, s.DCGM_GPU_UTIL)
HISTOGRAMS: tuple[str, ...] = (s.VLLM_TTFT, s.VLLM_E2E, s.HTTP_DURATION)

# Store names of the aggregates.
GPU_HOLDERS = "tidelens:gpu_holders"  # devices held (a time-sliced share counts 1/n); MIG: instances
GPU_ACTIVE_SUM = "tidelens:gr_engine_active:sum"  # share-weighted sum of the 0-1 ratio
GPU_UTIL_SUM = "tidelens:gpu_util:sum"  # share-weighted sum of percent
GPU_UTIL_DEVICES = "tidelens:gpu_util:devices"  # devices (shares) reporting GPU_UTIL
FB_USED_SUM = "tidelens:fb_used:sum"  # share-weighted MiB
GPU_REQUESTED_RUNNING = "tidelens:gpu_requested_running"  # per node, running pods' nvidia_com_gpu



# Autoscaler, Kueue and pod-info gauges every catalogue keeps under their own names:
# (metric, labels kept, signal).
_STATE_FAMILIES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (s.KSM_HPA_DESIRED, ("namespace", "horizontalpodautoscaler"), "autoscaler"),
    (s.KSM_HPA_CURRENT, ("namespace", "horizontalpodautoscaler"), "autoscaler"),
    (s.KSM_DEPLOY_READY, ("namespace", "deployment"), "autoscaler"),
    (s.KUEUE_PENDING, ("cluster_queue", "status"), "queue"),
    (s.KUEUE_ADMITTED_ACTIVE, ("cluster_queue",), "queue"),
    (s.KSM_POD_INFO, ("namespace", "pod", "node", "created_by_kind", "created_by_name",
                      "priority_class"), "gpu_holders"),
)

def increase_name(metric: str) -> str:
    """Store name of a counter's per-step increase, summed by service.

    >>> increase_name("vllm:request_success_total")
    'tidelens:vllm:request_success_total:increase'
    """
    return f"tidelens:{metric}:increase"


def sum_name(metric: str) -> str:
    return f"tidelens:{metric}:sum"


@dataclass(frozen=True)
class PullQuery:
    """One query of a pull: what is asked and under which metric name the answer is stored."""

    key: str  # stable id for incremental state
    metric: str  # store metric name of every returned series
    promql: str
    signal: str  # the entry of analytics.signals.SIGNALS it feeds
    # The server answers per-step increases; the store keeps their running sum under the
    # counter's own name, so counter semantics downstream give those increases back.
    accumulate: bool = False
    # Series summed over pods lose the pod: their ``service`` label is set from ``workload``.
    service_from_workload: bool = False
    # Ask for the steps this much later and store each point at its step: a recorded series
    # evaluated at some phase after the scrape holds a step's value at the step's end plus
    # up to one evaluation interval (analytics.live.route).
    shift_ms: int = 0


@dataclass(frozen=True)
class Scope:
    """Label matchers added to every selector, e.g. ``namespace="inference"``.

    ``pool`` (no matchers) pulls the whole fleet the server holds.
    """

    matchers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> "Scope":
        """``pool`` or ``label=value[,label=value]``; ``=~`` values are regexes.

        >>> Scope.parse("namespace=inference").selector("up")
        'up{namespace="inference"}'
        """
        if not text or text.strip() == "pool":
            return cls()
        out = []
        for part in text.split(","):
            if "=" not in part:
                raise ConfigError(f"--scope {text!r}: expected pool or label=value[,label=value]")
            label, value = part.split("=", 1)
            label = label.strip()
            op = "="
            if value.startswith("~"):
                op, value = "=~", value[1:]
            if not label.replace("_", "a").isalnum():
                raise ConfigError(f"--scope: {label!r} is not a label name")
            out.append((label + ("~" if op == "=~" else ""), value.strip()))
        return cls(tuple(out))

    def selector(self, metric: str, *extra: str) -> str:
        # Metric names may contain colons (vllm:..., recording rules): valid bare in PromQL.
        parts: list[str] = []
        name = metric
        for label, value in self.matchers:
            op = "=~" if label.endswith("~") else "="
            parts.append(f'{label.rstrip("~")}{op}{_quote(value)}')
        parts.extend(extra)
        return f"{name}{{{', '.join(parts)}}}" if parts else name

def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def last(selector: str, step_ms: int) -> str:
    """The last sample in ``(t - step, t]`` (ms resolution), whatever the server's lookback."""
    return f"last_over_time({selector}[{step_ms - 1}ms])"


# How far back a step's counter increase looks for the previous sample (a missed scrape).
PREVIOUS_SAMPLE_MS = 5 * 60_000


def step_increase(selector: str, step_ms: int) -> str:
    """Per-step counter increase without extrapolation (see the module docstring).

    ``C - P * (C >= bool P)``: the delta from the previous sample ``P`` (the last one before
    the step, up to 5 minutes or a step back), or ``C`` itself after a reset. A series without
    a previous sample yields nothing, which sums as 0. Arithmetic only: set operators
    (``or``/``and``) cost Prometheus about twice as much here (bench/scale.py).
    """
    cur = last(selector, step_ms)
    prev = f"last_over_time({selector}[{max(step_ms, PREVIOUS_SAMPLE_MS) - 1}ms] offset {step_ms}ms)"
    return f"({cur} - {prev} * ({cur} >= bool {prev}))"


def _workload_pattern() -> tuple[str, str]:
    """The workload map's pod-suffix rules as one RE2 alternation, and its replacement.

    RE2 alternation is leftmost-first, like the rules' order in :mod:`analytics.workloads`.
    """

    parts = [r.pattern.lstrip("^").rstrip("$").replace("(?P<w>", "(") for r in rules]
    parts.append("(.+)")
    repl = "".join(f"${{{i}}}" for i in range(1, len(parts) + 1))
    return "|".join(parts), repl


def with_workload(expr: str) -> str:
    """Add a ``workload`` label derived from the pod name (``exported_pod`` wins when set)."""
    pattern, repl = _workload_pattern()
    pattern = pattern.replace("\\", "\\\\")  # PromQL strings unescape once
    from_pod = f'label_replace({expr}, "workload", "{repl}", "pod", "{pattern}")'
    return f'label_replace({from_pod}, "workload", "{repl}", "exported_pod", "{pattern}")'


def fleet_queries(step_ms: int, scope: Scope | None = None) -> list[PullQuery]:
    """Compact aggregates for very large fleets: GPU counts per holder instead of per device.

    A 10,000-GPU fleet becomes a few series per pod and node. The timelines do not read these
    yet (``tidelens:*`` names, see docs/conventions.md "Live pulls").
    """
    scope = scope or Scope()
    out: list[PullQuery] = []
    by_dev = _by(HOLDER_LABELS + DEVICE_LABELS)
    holders = _by(HOLDER_LABELS)
    devices = _by(DEVICE_LABELS)

    # One element per (holder, device): which devices each pod (or nobody) holds this step.
    # _over_time functions drop metric names: one per metric, joined by `or`, so that equal
    # label sets of different metrics never collide.
    any_device = " or ".join(last(scope.selector(m), step_ms) for m in DEVICE_METRICS)
    held = f"group by ({by_dev}) ({any_device})"
    share = f"(1 / count by ({devices}) ({held}))"
    out.append(PullQuery("gpu_holders", GPU_HOLDERS,
                         f"sum by ({holders}) ({held} * on ({devices}) group_left () {share})",
                         "gpu_holders"))

    def weighted(metric: str) -> str:
        per_holder = f"max by ({by_dev}) ({last(scope.selector(metric), step_ms)})"
        return f"sum by ({holders}) ({per_holder} * on ({devices}) group_left () {share})"

    out.append(PullQuery("gr_engine_active_sum", GPU_ACTIVE_SUM, weighted(s.DCGM_GR_ENGINE_ACTIVE),
                         "gpu_activity"))
    out.append(PullQuery("gpu_util_sum", GPU_UTIL_SUM, weighted(s.DCGM_GPU_UTIL), "gpu_activity"))
    util_held = f"group by ({by_dev}) ({last(scope.selector(s.DCGM_GPU_UTIL), step_ms)})"
    out.append(PullQuery("gpu_util_devices", GPU_UTIL_DEVICES,
                         f"sum by ({holders}) ({util_held} * on ({devices}) group_left () {share})",
                         "gpu_activity"))
    out.append(PullQuery("fb_used_sum", FB_USED_SUM, weighted(s.DCGM_FB_USED), "gpu_memory"))

    svc = _by(SERVICE_LABELS)
    for hist in HISTOGRAMS:
        for suffix, by in (("_bucket", svc + ", le"), ("_count", svc), ("_sum", svc)):
            metric = hist + suffix
            out.append(PullQuery(f"inc:{metric}", increase_name(metric),
                                 f"sum by ({by}) ({with_workload(step_increase(scope.selector(metric), step_ms))})",
                                 "request_latency"))
    out.append(PullQuery(f"inc:{s.VLLM_SUCCESS}", increase_name(s.VLLM_SUCCESS),
                         f"sum by ({svc}) ({with_workload(step_increase(scope.selector(s.VLLM_SUCCESS), step_ms))})",
                         "request_rate"))
    for gauge in (s.VLLM_RUNNING, s.VLLM_WAITING):
        out.append(PullQuery(f"sum:{gauge}", sum_name(gauge),
                             f"sum by ({svc}) ({with_workload(last(scope.selector(gauge), step_ms))})",
                             "in_flight"))

    # Small families keep their names: the timelines read them as files would give them.
    for metric, labels, signal in _STATE_FAMILIES:
        out.append(PullQuery(f"keep:{metric}", metric,
                             f"max by ({_by(labels)}) ({last(scope.selector(metric), step_ms)})", signal))
    for metric, labels in ((s.KUEUE_ADMITTED, ("cluster_queue",)),
                           (s.KUEUE_EVICTED, ("cluster_queue", "reason"))):
        out.append(PullQuery(f"inc:{metric}", increase_name(metric),
                             f"sum by ({_by(labels)}) ({step_increase(scope.selector(metric), step_ms)})",
                             "queue"))
    alloc = scope.selector(s.KSM_NODE_GPU_ALLOCATABLE, f'resource="{s.KSM_GPU_RESOURCE}"')
    out.append(PullQuery(f"keep:{s.KSM_NODE_GPU_ALLOCATABLE}", s.KSM_NODE_GPU_ALLOCATABLE,
                         f"max by (node, resource) ({last(alloc, step_ms)})", "pod_gpu_requests"))
    req = scope.selector(s.KSM_POD_GPU_REQUEST, f'resource="{s.KSM_GPU_RESOURCE}"')
    running = scope.selector(s.KSM_POD_PHASE, 'phase="Running"')
    out.append(PullQuery("gpu_requested_running", GPU_REQUESTED_RUNNING,
                         f"sum by (node) ({last(req, step_ms)} * on (namespace, pod) group_left () "
                         f"(max by (namespace, pod) ({last(running, step_ms)}) == 1))",
                         "pod_gpu_requests"))
    return out


# Device series: the labels the pool timeline and the workload map read, in every spelling.
DEVICE_KEEP: tuple[str, ...] = (
    "gpu", "UUID", "GPU_I_PROFILE", "GPU_I_ID", "Hostname", "hostname", "node", "kubernetes_node",
    "instance", "modelName", "namespace", "exported_namespace", "pod", "exported_pod", "container",
    "exported_container")
SERVICE_KEEP: tuple[str, ...] = ("namespace", "exported_namespace", "service", "exported_service",
                                 "model_name", "workload")
POD_KEEP: tuple[str, ...] = ("namespace", "exported_namespace", "pod", "exported_pod", "model_name",
                             "service", "exported_service")


def timeline_queries(step_ms: int, scope: Scope | None = None) -> list[PullQuery]:
    """What the pool and service timelines read, reduced by the server, under the raw names.

    - device metrics (activity, utilization, memory): the last sample per step per device and
      holder, scrape labels dropped;
    - latency histograms: finite buckets and ``_count`` summed over pods by service as per-step
      increases (stored as running sums); the ``+Inf`` bucket per pod, sampled per step (the
      timeline counts serving replicas from it);
    - in-flight gauges summed by service; autoscaler, Kueue and kube-state-metrics series
      sampled per step with their own labels.

    The timelines read the result exactly as they read files of the same data.
    """
    scope = scope or Scope()
    out: list[PullQuery] = []
    dev = _by(DEVICE_KEEP)
    for metric in (s.DCGM_GR_ENGINE_ACTIVE, s.DCGM_GPU_UTIL, s.DCGM_FB_USED):
        out.append(PullQuery(f"dev:{metric}", metric,
                             f"max by ({dev}) ({last(scope.selector(metric), step_ms)})",
                             "gpu_activity" if metric != s.DCGM_FB_USED else "gpu_memory"))
    svc = _by(SERVICE_KEEP)
    for hist in HISTOGRAMS:
        bucket = hist + "_bucket"
        finite = scope.selector(bucket, 'le!="+Inf"')
        out.append(PullQuery(f"svc:{bucket}", bucket,
                             f"sum by ({svc}, le) ({with_workload(step_increase(finite, step_ms))})",
                             "request_latency", accumulate=True, service_from_workload=True))
        inf = scope.selector(bucket, 'le="+Inf"')
        out.append(PullQuery(f"pod:{bucket}:inf", bucket,
                             f"max by ({_by(POD_KEEP)}, le) ({last(inf, step_ms)})", "request_latency"))
        count = hist + "_count"
        out.append(PullQuery(f"svc:{count}", count,
                             f"sum by ({svc}) ({with_workload(step_increase(scope.selector(count), step_ms))})",
                             "request_rate", accumulate=True, service_from_workload=True))
    for gauge in (s.VLLM_RUNNING, s.VLLM_WAITING):
        out.append(PullQuery(f"svc:{gauge}", gauge,
                             f"sum by ({svc}) ({with_workload(last(scope.selector(gauge), step_ms))})",
                             "in_flight", service_from_workload=True))
    for metric, labels, signal in _STATE_FAMILIES + (
            (s.KSM_POD_PHASE, ("namespace", "pod", "phase"), "pod_gpu_requests"),
            (s.KSM_POD_GPU_REQUEST, ("namespace", "pod", "container", "node", "resource", "unit"),
             "pod_gpu_requests"),
            (s.KSM_NODE_GPU_ALLOCATABLE, ("node", "resource", "unit"), "pod_gpu_requests")):
        sel = scope.selector(metric, 'resource=~"nvidia_com_.*"') if "resource" in labels \
            else scope.selector(metric)
        out.append(PullQuery(f"keep:{metric}", metric,
                             f"max by ({_by(labels)}) ({last(sel, step_ms)})", signal))
    for metric, labels in ((s.KUEUE_ADMITTED, ("cluster_queue",)),
                           (s.KUEUE_EVICTED, ("cluster_queue", "reason"))):
        out.append(PullQuery(f"acc:{metric}", metric,
                             f"sum by ({_by(labels)}) ({step_increase(scope.selector(metric), step_ms)})",
                             "queue", accumulate=True))
    return out


def raw_query(selector: str, window_ms: int) -> str:
    """A range-vector selector returning the raw samples of ``(t - window, t]``."""
    return f"{selector}[{window_ms - 1}ms]"


def describe(queries: list[PullQuery]) -> str:
    """The queries as copyable PromQL, one commented block per stored metric."""
    return "\n\n".join(f"# {q.metric}  ({q.signal})\n{q.promql}" for q in queries)
