"""From the chosen what-if to the cluster: the manifests that enforce a modelled pool policy.

:func:`make_plan` turns one :class:`~analytics.whatif.PoolScenario` and one policy into
Kubernetes objects, with the numbers the what-if used (the one inference reservation of
:func:`analytics.whatif.reservation`, the polite release hour, the tidal window, the MIG
profile the model chose, time-slicing's pods per GPU):

- **Kueue** ``kueue.x-k8s.io/v1beta2`` (its storage version): ResourceFlavors, ClusterQueues in
  one cohort (``spec.cohortName``) with nominal quotas, borrowing and lending limits and the
  preemption the policy models, LocalQueues per team namespace, WorkloadPriorityClasses;
- **time windows**: Kueue has no time-based quota, so the polite and tidal hours are Tidelens's
  own convention: CronJobs (``spec.timeZone``) that set the batch ClusterQueue's ``stopPolicy``
  to ``HoldAndDrain`` when batch must leave and back to ``None`` when it may run (lowering a
  quota would not evict admitted jobs), with their ServiceAccount and RBAC;
- **MIG**: an ``nvidia-mig-parted`` config (``version: v1``, ``mig-configs``) in a ConfigMap,
  selected by the ``nvidia.com/mig.config`` node label, for the device plugin's ``mixed``
  strategy (resources ``nvidia.com/mig-<profile>``);
- **time-slicing**: the NVIDIA device plugin's ``sharing.timeSlicing`` config in a ConfigMap.

:func:`write_plan` writes them as numbered YAML files (the order to apply them) and a README
saying what each enforces and which modelled number it carries. Team names that are not valid
Kubernetes names are sanitised by :func:`k8s_name`, and the mapping is listed.

>>> k8s_name("ML_Research Team!")
'ml-research-team'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.errors import ConfigError

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KAI_API = "scheduling.run.ai/v2"
SCHEDULERS = ("kueue", "kai")
GPU = "nvidia.com/gpu"
COHORT = "tidelens-pool"
SYSTEM_NS = "tidelens-system"
SWITCH_SA = "tidelens-queue-switch"
INFERENCE_PRIORITY = ("inference-high", 1000)
TRAINING_PRIORITY = ("training-low", 100)
DEFAULT_KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"
MIG_CONFIG = "tidelens-inference"
# The GPU Feature Discovery product label of each model the what-if knows (check yours with
# `kubectl get nodes -L nvidia.com/gpu.product`).
GPU_PRODUCT = {"A100-40GB": "NVIDIA-A100-SXM4-40GB", "A100-80GB": "NVIDIA-A100-SXM4-80GB",
               "H100-80GB": "NVIDIA-H100-80GB-HBM3", "H200-141GB": "NVIDIA-H200"}
_NAME_BAD = re.compile(r"[^a-z0-9-]+")


def k8s_name(text: str, *, limit: int = 63) -> str:
    """A DNS-1123 label from any text: lower case, runs of other characters become ``-``, no
    leading or trailing ``-``; longer than ``limit`` is cut and given a hash suffix (two long
    names never collide); an empty result is ``team-<hash>``.

    >>> k8s_name("Team A/B"), k8s_name("---"), len(k8s_name("x" * 80))
    ('team-a-b', 'team-58b63e273b', 63)
    """
    out = _NAME_BAD.sub("-", text.lower()).strip("-")
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    if not out:
        return f"team-{digest}"
    if len(out) > limit:
        out = out[: limit - 11].rstrip("-") + "-" + digest
    return out


@dataclass
class Plan:
    """The objects of one policy, by file, and what the README says about them."""

    policy: str
    files: dict[str, list[dict[str, Any]]]
    numbers: dict[str, Any]  # the modelled numbers the objects carry
    names: dict[str, str]  # team -> the Kubernetes name it became
    notes: list[str] = field(default_factory=list)  # per file: what it enforces
    readme: str = ""

    def objects(self) -> list[dict[str, Any]]:
        return [o for objs in self.files.values() for o in objs]


# -- builders -----------------------------------------------------------------------------------
def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "tidelens", **labels}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _flavor(name: str, node_labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(name),
            "spec": {"nodeLabels": node_labels}}


def _quota(name: str, nominal: int, *, borrowing: int | None = None,
           lending: int | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"name": name, "nominalQuota": int(nominal)}
    if borrowing is not None:
        r["borrowingLimit"] = int(borrowing)
    if lending is not None:
        r["lendingLimit"] = int(lending)
    return r


def _cluster_queue(name: str, flavor: str, resource: dict[str, Any], *, cohort: bool,
                   preemption: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},  # any namespace: its LocalQueue decides which queue it uses
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [resource["name"]],
                            "flavors": [{"name": flavor, "resources": [resource]}]}],
        "stopPolicy": "None",
    }
    if cohort:
        spec["cohortName"] = COHORT
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(name), "spec": spec}


def _local_queue(team_ns: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue",
            "metadata": _meta(cluster_queue, team_ns), "spec": {"clusterQueue": cluster_queue}}


def _priority(name: str, value: int, what: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": _meta(name),
            "value": value, "description": what}


def cron_of_hour(hour: float) -> str:
    """The daily cron schedule of an hour of day (quarter hours kept).

    >>> cron_of_hour(9.0), cron_of_hour(22.25)
    ('0 9 * * *', '15 22 * * *')
    """
    minutes = int(round((hour % 24) * 60)) % 1440
    return f"{minutes % 60} {minutes // 60} * * *"


def _switch(name: str, queue: str, stop: str, hour: float, tz: str, image: str) -> dict[str, Any]:
    patch = '{"spec":{"stopPolicy":"%s"}}' % stop
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(name, SYSTEM_NS),
            "spec": {"schedule": cron_of_hour(hour), "timeZone": tz, "concurrencyPolicy": "Forbid",
                     "startingDeadlineSeconds": 600, "successfulJobsHistoryLimit": 3,
                     "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": {"backoffLimit": 4, "template": {"spec": {
                         "serviceAccountName": SWITCH_SA, "restartPolicy": "OnFailure",
                         "containers": [{"name": "kubectl", "image": image, "command": [
                             "kubectl", "patch", "clusterqueue", queue, "--type=merge", "-p", patch]}]}}}}}}


def _switch_rbac() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(SWITCH_SA, SYSTEM_NS)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(SWITCH_SA),
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"],
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(SWITCH_SA),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SWITCH_SA},
         "subjects": [{"kind": "ServiceAccount", "name": SWITCH_SA, "namespace": SYSTEM_NS}]},
    ]


def _kai_queue(name: str, gpu_quota: float, gpu_limit: float, *, weight: float = 1.0,
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
    return {"apiVersion": KAI_API, "kind": "Queue", "metadata": _meta(name), "spec": spec}


def _kai_queues(policy: str, gpus: int, reserved: int, soft: int) -> tuple[list[dict[str, Any]], str]:
    """The KAI queues of a policy, and what they enforce (quota in GPUs; under time-slicing and
    MIG still in GPUs: KAI counts a fraction of a GPU, not replicas or instances)."""
    top = _kai_queue(COHORT, gpus, gpus)
    if policy in ("shared", "timeslice"):
        return [top, _kai_queue("gpu-pool", gpus, gpus, parent=COHORT)], (
            "one queue under the pool's for every team: first come first served")
    if policy == "partitioned":
        return [top, _kai_queue("inference", reserved, reserved + soft, parent=COHORT, priority=200, weight=0),
                _kai_queue("soft-shared", soft, soft, parent=COHORT, weight=0),
                _kai_queue("batch", gpus - reserved - soft, gpus - reserved - soft, parent=COHORT, weight=0)], (
            f"inference's quota {reserved} GPUs, its limit {reserved + soft} (class B as overflow); "
            f"batch limited to its {gpus - reserved - soft} (no over-quota weight: nobody borrows)")
    # polite, preemption, tidal, mig: inference owns its reservation and reclaims it (KAI
    # reclaims over-quota use for a queue under its quota); batch may use what is idle.
    return [top, _kai_queue("inference", reserved, gpus, parent=COHORT, priority=200),
            _kai_queue("batch", gpus - reserved, gpus, parent=COHORT, priority=100)], (
        f"inference's quota {reserved} GPUs, batch's {gpus - reserved}; either may run over quota "
        "on idle GPUs, and KAI reclaims it for a queue under its quota")


def _config_map(name: str, namespace: str, key: str, text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace), "data": {key: text}}


# -- the plan ---------------------------------------------------------------------------------
def make_plan(scn: Any, policy: str, *, scheduler: str = "kueue",
              kubectl_image: str = DEFAULT_KUBECTL_IMAGE) -> Plan:
    """The manifests that enforce ``policy`` for the pool and service of ``scn``.

    The window CronJobs run in UTC (``spec.timeZone: UTC``): the what-if's hours are UTC hours of
    day, and a daily UTC hour has no fixed local equivalent across a daylight-saving change.

    Raises
    ------
    ConfigError
        An unknown policy, or a MIG policy on a GPU model without a MIG table.
    """
    import yaml

    from analytics.whatif import POLICIES, reservation, simulate

    if policy not in POLICIES:
        raise ConfigError(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"--scheduler {scheduler!r}: choose one of {', '.join(SCHEDULERS)}")
    pool, svc = scn.pool, scn.service
    gpus = int(pool.gpus)
    reserved, reserved_why = reservation(scn)
    reserved = int(min(reserved, gpus))
    teams = sorted({j.team for j in scn.batch.jobs})
    names: dict[str, str] = {}
    for team in [svc.team, *teams]:
        base = k8s_name(team)
        name, k = base, 2
        while name in names.values() and names.get(team) != name:
            name, k = f"{base[:60]}-{k}", k + 1
        names.setdefault(team, name)
    inference_ns = names[svc.team]
    batch_ns = sorted({names[t] for t in teams} - {inference_ns})
    model = pool.gpu_model
    gpu_flavor = f"gpu-{k8s_name(model)}"
    product = {"nvidia.com/gpu.product": GPU_PRODUCT.get(model, k8s_name(model))}
    files: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    timezone = "UTC"
    modelled = simulate(scn, policy).summary  # what the plan is expected to deliver, as modelled
    numbers: dict[str, Any] = {"policy": policy, "pool_gpus": gpus, "reservation_gpus": reserved,
                               "reservation_source": reserved_why, "timezone": timezone,
                               "modelled_violation_minutes": round(float(modelled["violation_minutes"]), 1),
                               "modelled_batch_goodput_gpu_hours": round(float(modelled["batch_goodput_gpu_hours"]), 1),
                               "modelled_cost_per_useful_gpu_hour": (
                                   None if modelled["cost_per_useful_gpu_hour"] is None
                                   else round(float(modelled["cost_per_useful_gpu_hour"]), 2))}
    flavors = [_flavor(gpu_flavor, product)]
    priorities = [_priority(*INFERENCE_PRIORITY, "latency-critical inference: admitted first, may "
                            "preempt training"),
                  _priority(*TRAINING_PRIORITY, "batch and training: admitted into what is free")]
    queues: list[dict[str, Any]] = []
    local: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    reclaim = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"},
               "withinClusterQueue": "LowerPriority"}

    def two_queues(preempt: bool) -> None:
        queues.append(_cluster_queue("inference", gpu_flavor, _quota(GPU, reserved), cohort=True,
                                     preemption=reclaim if preempt else None))
        queues.append(_cluster_queue("batch", gpu_flavor, _quota(GPU, gpus - reserved), cohort=True))
        local.append(_local_queue(inference_ns, "inference"))
        local.extend(_local_queue(ns, "batch") for ns in batch_ns)

    if policy in ("shared", "timeslice"):
        per_gpu = int(pool.timeslice_replicas) if policy == "timeslice" else 1
        queues.append(_cluster_queue("gpu-pool", gpu_flavor, _quota(GPU, gpus * per_gpu), cohort=False))
        local.extend(_local_queue(ns, "gpu-pool") for ns in [inference_ns, *batch_ns])
        numbers["quota_units"] = "time-sliced GPU replicas" if per_gpu > 1 else "GPUs"
        notes.append("30-kueue-clusterqueues.yaml: one queue for every team, first come first served "
                     + ("(time-sliced: the quota counts replicas, pods per GPU x GPUs)" if per_gpu > 1
                        else "(what a shared pool is without Tidelens: written so the queues exist)"))
        if policy == "timeslice":
            numbers["timeslice_replicas"] = per_gpu
            config = {"version": "v1", "flags": {"migStrategy": "none"},
                      "sharing": {"timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                                  "resources": [{"name": GPU, "replicas": per_gpu}]}}}
            files["70-device-plugin-timeslicing.yaml"] = [_config_map(
                "tidelens-time-slicing", "gpu-operator", "tidelens", yaml.safe_dump(config, sort_keys=False))]
            notes.append(f"70-device-plugin-timeslicing.yaml: the NVIDIA device plugin advertises each GPU "
                         f"as {per_gpu} (point the GPU Operator's devicePlugin.config at this ConfigMap)")
    elif policy in ("polite", "preemption", "tidal"):
        two_queues(preempt=policy in ("preemption", "tidal"))
        notes.append(f"30-kueue-clusterqueues.yaml: inference owns {reserved} GPUs nominally, batch the "
                     f"other {gpus - reserved}; each borrows what the other leaves unused"
                     + ("; inference reclaims its quota by preempting lower-priority batch"
                        if policy != "polite" else "; nothing is preempted (polite)"))
        if policy == "polite":
            start = min((j.start_hour for j in scn.batch.jobs), default=pool.tidal_start_hour)
            windows = [_switch("tidelens-batch-leave", "batch", "HoldAndDrain", pool.polite_release_hour,
                               timezone, kubectl_image),
                       _switch("tidelens-batch-open", "batch", "None", start, timezone, kubectl_image)]
            numbers.update(release_hour=float(pool.polite_release_hour), open_hour=float(start))
        elif policy == "tidal":
            windows = [_switch("tidelens-batch-leave", "batch", "HoldAndDrain", pool.tidal_end_hour,
                               timezone, kubectl_image),
                       _switch("tidelens-batch-open", "batch", "None", pool.tidal_start_hour, timezone,
                               kubectl_image)]
            numbers.update(release_hour=float(pool.tidal_end_hour), open_hour=float(pool.tidal_start_hour))
    elif policy == "partitioned":
        soft = int(round(pool.split_b * gpus))
        spot = gpus - reserved - soft
        spot_flavor = f"{gpu_flavor}-spot"
        flavors.append(_flavor(spot_flavor, {**product, "tidelens.io/capacity": "spot"}))
        queues.append(_cluster_queue("inference", gpu_flavor, _quota(GPU, reserved, lending=0, borrowing=soft),
                                     cohort=True, preemption=reclaim))
        queues.append(_cluster_queue("soft-shared", gpu_flavor, _quota(GPU, soft), cohort=True))
        queues.append(_cluster_queue("batch", spot_flavor, _quota(GPU, spot, borrowing=0, lending=0),
                                     cohort=True))
        local.append(_local_queue(inference_ns, "inference"))
        local.extend(_local_queue(ns, "batch") for ns in batch_ns)
        numbers.update(class_a_gpus=reserved, class_b_gpus=soft, class_c_gpus=spot, inference_borrowing_limit=soft)
        notes.append(f"30-kueue-clusterqueues.yaml: class A, {reserved} GPUs inference never lends; class B, "
                     f"{soft} soft-shared GPUs inference may borrow; class C, {spot} spot GPUs batch neither "
                     "borrows beyond nor lends")
    elif policy == "mig":
        from analytics.whatif.policies import capacity

        layout = capacity(scn, "mig").layout  # the placement the what-if modelled
        if layout is None:
            raise ConfigError(f"pool.gpu_model={model!r}: no MIG layout fits the service; choose another "
                              "GPU model or policy")
        profile, per_gpu = layout.profile.name, int(layout.instances)
        mig_resource = f"nvidia.com/mig-{profile}"
        mig_flavor = f"mig-{k8s_name(profile)}"
        flavors.append(_flavor(mig_flavor, {**product, "nvidia.com/mig.config": MIG_CONFIG}))
        queues.append(_cluster_queue("inference", mig_flavor, _quota(mig_resource, reserved * per_gpu),
                                     cohort=True, preemption=reclaim))
        queues.append(_cluster_queue("batch", gpu_flavor, _quota(GPU, gpus - reserved), cohort=True))
        local.append(_local_queue(inference_ns, "inference"))
        local.extend(_local_queue(ns, "batch") for ns in batch_ns)
        windows = [_switch("tidelens-batch-leave", "batch", "HoldAndDrain", pool.tidal_end_hour, timezone,
                           kubectl_image),
                   _switch("tidelens-batch-open", "batch", "None", pool.tidal_start_hour, timezone, kubectl_image)]
        mig_config = {"version": "v1", "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            MIG_CONFIG: [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: per_gpu}}]}}
        files["80-mig-parted.yaml"] = [_config_map("tidelens-mig-parted", "gpu-operator", "config.yaml",
                                                   yaml.safe_dump(mig_config, sort_keys=False))]
        numbers.update(mig_profile=profile, mig_instances_per_gpu=per_gpu,
                       inference_mig_instances=reserved * per_gpu, mig_strategy="mixed",
                       release_hour=float(pool.tidal_end_hour), open_hour=float(pool.tidal_start_hour),
                       resplit_drain_min=float(pool.mig_resplit_drain_min))
        notes.append(f"30-kueue-clusterqueues.yaml: inference on {reserved * per_gpu} {mig_resource} "
                     f"instances ({reserved} GPUs x {per_gpu}), batch on the other {gpus - reserved} whole GPUs")
        notes.append(f"80-mig-parted.yaml: label the {reserved} inference GPUs' nodes "
                     f"nvidia.com/mig.config={MIG_CONFIG} (the rest all-disabled); the device plugin in "
                     f"mixed strategy then offers {mig_resource}; re-splitting drains a node first "
                     f"(modelled: {pool.mig_resplit_drain_min:g} min a GPU)")
    numbers["scheduler"] = scheduler
    if scheduler == "kai":
        # The same plan with KAI Scheduler queues in place of Kueue's objects: KAI has no queue
        # stop, so a window is not enforced (said in the README), and its MIG/time-slicing
        # device configs are the same files.
        soft = int(round(pool.split_b * gpus)) if policy == "partitioned" else 0
        kai, what = _kai_queues(policy, gpus, reserved, soft)
        files["10-kai-queues.yaml"] = kai
        notes[:] = [n for n in notes if not n.startswith("30-kueue")]
        notes.insert(0, f"10-kai-queues.yaml: {what}; label each workload's pods "
                        "`kai.scheduler/queue: <queue>` and `schedulerName: kai-scheduler`")
        if windows:
            notes.append("Not enforced under KAI: the batch window (KAI has no queue stop; the Kueue "
                         f"plan switches it at {numbers['release_hour']:05.2f} and "
                         f"{numbers['open_hour']:05.2f} UTC): schedule batch submissions in it")
        files = {k: v for k, v in files.items() if not k.startswith(("6", "5"))}
        files["00-namespace.yaml"] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)}
                                      for ns in sorted({inference_ns, *batch_ns})]
        files = dict(sorted(files.items()))
        plan = Plan(policy=policy, files=files, numbers=numbers, names=names, notes=notes)
        plan.readme = _readme(plan, scn)
        return plan
    files["00-namespace.yaml"] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)}
                                  for ns in sorted({inference_ns, *batch_ns, *( [SYSTEM_NS] if windows else [])})]
    files["10-kueue-flavors.yaml"] = flavors
    files["20-kueue-priorities.yaml"] = priorities
    files["30-kueue-clusterqueues.yaml"] = queues
    files["40-kueue-localqueues.yaml"] = local
    if windows:
        files["50-window-rbac.yaml"] = _switch_rbac()
        files["60-window-cronjobs.yaml"] = windows
        notes.append(f"50-window-rbac.yaml: the ServiceAccount {SWITCH_SA} in {SYSTEM_NS} may get and "
                     "patch ClusterQueues, and nothing else (what the window switch needs)")
        notes.append(f"60-window-cronjobs.yaml: at {numbers['release_hour']:05.2f} h ({timezone}) the batch "
                     "queue is set to stopPolicy HoldAndDrain (admitted batch is evicted, nothing new is "
                     f"admitted); at {numbers['open_hour']:05.2f} h back to None. Kueue has no time-based "
                     "quota: this switch is Tidelens's convention, and lowering a quota instead would not "
                     "evict admitted jobs")
    files = dict(sorted(files.items()))
    plan = Plan(policy=policy, files=files, numbers=numbers, names=names, notes=notes)
    plan.readme = _readme(plan, scn)
    return plan


def _readme(plan: Plan, scn: Any) -> str:
    n = plan.numbers
    lines = [f"# Tidelens plan: {plan.policy}", "",
             f"The manifests that enforce the what-if's `{plan.policy}` policy for `{scn.service.team}`'s "
             f"service on a pool of {n['pool_gpus']} GPUs ({scn.pool.gpu_model}). Generated from the "
             "scenario the What-if page (or `tidelens whatif`) modelled; its numbers are these:", ""]
    lines += [f"- `{k}`: {v}" for k, v in n.items()]
    lines += ["", "## What each file enforces", ""]
    lines += [f"- {note}" for note in plan.notes]
    static = {
        "00-namespace.yaml": "the team namespaces the queues serve (and the window switch's own)",
        "10-kueue-flavors.yaml": "the GPU flavors; `nodeLabels` use GPU Feature Discovery's "
                                 "`nvidia.com/gpu.product` (check yours: `kubectl get nodes -L "
                                 "nvidia.com/gpu.product`)",
        "20-kueue-priorities.yaml": f"WorkloadPriorityClasses {INFERENCE_PRIORITY[0]} "
                                    f"({INFERENCE_PRIORITY[1]}) and {TRAINING_PRIORITY[0]} "
                                    f"({TRAINING_PRIORITY[1]}); label workloads "
                                    "`kueue.x-k8s.io/priority-class`",
        "40-kueue-localqueues.yaml": "one LocalQueue per team namespace; label jobs "
                                     "`kueue.x-k8s.io/queue-name` with it"}
    lines += [f"- {name}: {what}" for name, what in static.items() if name in plan.files]
    lines += ["",
              "## Apply in this order", "",
              ("Kueue (v0.14 or later, for `kueue.x-k8s.io/v1beta2`)" if n["scheduler"] == "kueue"
               else "The KAI Scheduler (queues `scheduling.run.ai/v2`)")
              + " and, for MIG or time-slicing, the NVIDIA GPU Operator installed first; then "
              "`kubectl apply -f` each file in name order.", "", "## Team names", "",
              "Kubernetes names are lower-case letters, digits and `-` (63 at most): other characters "
              "become `-`, and a name too long is cut with a hash suffix. The mapping:", ""]
    lines += [f"- `{team}` -> `{name}`" for team, name in plan.names.items()]
    lines += ["", "## Policies and their objects", "",
              "- shared: one ClusterQueue for all (first come first served); no window.",
              "- polite: inference and batch queues in a cohort, no preemption; CronJobs drain batch at the "
              "release hour and reopen it at the jobs' start hour.",
              "- preemption: the same queues; inference reclaims its quota by preempting lower priority "
              "(`reclaimWithinCohort: Any`, `withinClusterQueue: LowerPriority`).",
              "- tidal: preemption's queues plus CronJobs: batch runs only in the tidal window.",
              "- partitioned: class A (inference, lends nothing), B (soft-shared, inference may borrow), "
              "C (spot flavor for batch, no borrowing).",
              "- mig: inference on MIG instances (mig-parted config, mixed strategy), batch on whole GPUs "
              "in the tidal window.",
              "- timeslice: the device plugin's time-slicing config and one queue counting replicas.",
              "- With `--scheduler kai`, KAI Scheduler queues (`scheduling.run.ai/v2`: GPU quota, "
              "over-quota weight, limit) take Kueue's place; the device configs are the same.", ""]
    return "\n".join(lines)


def dump_yaml(objs: list[dict[str, Any]]) -> str:
    """Multi-document YAML of ``objs``; a multi-line string (an embedded config) as a ``|`` block."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    return yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False)


def write_plan(plan: Plan, out_dir: str | Path) -> list[Path]:
    """Write the plan's files (multi-document YAML) and README.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, objs in plan.files.items():
        p = out / name
        p.write_text(dump_yaml(objs), encoding="utf-8")
        written.append(p)
    readme = out / "README.md"
    readme.write_text(plan.readme, encoding="utf-8")
    return [*written, readme]


def plan_zip(plan: Plan) -> bytes:
    """The plan's folder as one zip file (the What-if page's download)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, objs in plan.files.items():
            z.writestr(f"tidelens-plan-{plan.policy}/{name}", dump_yaml(objs))
        z.writestr(f"tidelens-plan-{plan.policy}/README.md", plan.readme)
    return buf.getvalue()
