"""From the chosen what-if to the cluster: the manifests that enforce a modelled pool policy.

:func:`make_plan` turns one :class:`~analytics.whatif.PoolScenario` and one policy into
Kubernetes objects, with the numbers the what-if used (the one inference reservation of
:func:`analytics.whatif.reservation`, the polite release hour, the tidal window, the MIG
profile the model chose, time-slicing's pods per GPU). The package, by job:

- :mod:`~analytics.plan.names`: team names mapped to valid namespaces, the system namespaces
  a plan leaves alone;
- :mod:`~analytics.plan.objects`: one builder per object (Kueue ``kueue.x-k8s.io/v1beta2``,
  served from Kueue v0.15 and stored from v0.16; ConfigMaps; Namespaces);
- :mod:`~analytics.plan.kueue`: each policy's flavors, ClusterQueues, LocalQueues and MIG or
  time-slicing config; :mod:`~analytics.plan.windows`: the batch window's CronJobs and RBAC;
  :mod:`~analytics.plan.kai`: the KAI Scheduler's queues in Kueue's place;
- :mod:`~analytics.plan.readme` and :mod:`~analytics.plan.write`: the README and the files.

A plan never writes a system namespace (``kube-*``, ``default``, the GPU Operator's, the
schedulers') as a Namespace object, since ``kubectl delete -f`` on the plan would delete it;
a team whose namespace is one gets no LocalQueue either, unless
``allow_system_namespaces`` (:class:`PlanOptions`) says so.

>>> k8s_name("ML_Research Team!")
'ml-research-team'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.errors import ConfigError
from analytics.plan.kai import KAI_API, kai_queues
from analytics.plan.kueue import Pool, kueue_part
from analytics.plan.migparted import MIG_CONFIG
from analytics.plan.names import SYSTEM_NAMESPACES, TeamNames, is_k8s_name, k8s_name, map_teams, system_namespace
from analytics.plan.objects import COHORT, GPU, INFERENCE_PRIORITY, KUEUE_API, TRAINING_PRIORITY, namespace, priorities
from analytics.plan.readme import readme as _readme
from analytics.plan.result import Plan
from analytics.plan.windows import DEFAULT_KUBECTL_IMAGE, SWITCH_SA, SYSTEM_NS, cron_of_hour, switch_rbac
from analytics.plan.write import dump_yaml, plan_zip, write_plan
from analytics.whatif import POLICIES, reservation, simulate

__all__ = ["COHORT", "DEFAULT_KUBECTL_IMAGE", "GPU", "GPU_PRODUCT", "INFERENCE_PRIORITY", "KAI_API",
           "KUEUE_API", "MIG_CONFIG", "SCHEDULERS", "SWITCH_SA", "SYSTEM_NAMESPACES", "SYSTEM_NS",
           "TRAINING_PRIORITY", "Plan", "PlanOptions", "TeamNames", "cron_of_hour", "dump_yaml",
           "is_k8s_name", "k8s_name", "make_plan", "map_teams", "plan_zip", "system_namespace",
           "write_plan"]

SCHEDULERS = ("kueue", "kai")
# The GPU Feature Discovery product label of each model the what-if knows (check yours with
# `kubectl get nodes -L nvidia.com/gpu.product`).
GPU_PRODUCT = {"A100-40GB": "NVIDIA-A100-SXM4-40GB", "A100-80GB": "NVIDIA-A100-SXM4-80GB",
               "H100-80GB": "NVIDIA-H100-80GB-HBM3", "H200-141GB": "NVIDIA-H200"}
TIMEZONE = "UTC"


@dataclass(frozen=True)
class PlanOptions:
    """How a plan is written, beyond the scenario and the policy (the CLI's flags read their
    help from here)."""

    scheduler: str = field(default="kueue", metadata={
        "help": "write Kueue objects (default) or KAI Scheduler queues", "choices": SCHEDULERS})
    kubectl_image: str = field(default=DEFAULT_KUBECTL_IMAGE, metadata={
        "help": f"the image the window CronJobs run kubectl from (default {DEFAULT_KUBECTL_IMAGE})"})
    allow_system_namespaces: bool = field(default=False, metadata={
        "help": "put the LocalQueue of a team whose namespace is a system one (kube-*, default, "
                "gpu-operator, kueue-system, kai-scheduler, openshift-*) in that namespace; without "
                "it such a team is skipped with a note. Either way no Namespace object is written "
                "for a system namespace, so `kubectl delete -f` on the plan cannot delete it"})



def _teams_as_text(scn: Any) -> Any:
    """``scn`` with every team name as text: a TOML scenario may hold ``team = 7``, and the
    model sorts teams (an integer beside a string would end in a TypeError)."""
    from dataclasses import replace

    if isinstance(scn.service.team, str) and all(isinstance(j.team, str) for j in scn.batch.jobs):
        return scn
    jobs = tuple(replace(j, team=str(j.team)) for j in scn.batch.jobs)
    return replace(scn, service=replace(scn.service, team=str(scn.service.team)),
                   batch=replace(scn.batch, jobs=jobs))


def _numbers(scn: Any, policy: str, gpus: int, reserved: int, reserved_why: str) -> dict[str, Any]:
    modelled = simulate(scn, policy).summary  # what the plan is expected to deliver, as modelled
    cost = modelled.cost_per_useful_gpu_hour
    return {"policy": policy, "pool_gpus": gpus, "reservation_gpus": reserved,
            "reservation_source": reserved_why, "timezone": TIMEZONE,
            "modelled_violation_minutes": round(float(modelled.violation_minutes), 1),
            "modelled_batch_goodput_gpu_hours": round(float(modelled.batch_goodput_gpu_hours), 1),
            "modelled_cost_per_useful_gpu_hour": None if cost is None else round(float(cost), 2)}


def make_plan(scn: Any, policy: str, *, scheduler: str = "kueue",
              kubectl_image: str = DEFAULT_KUBECTL_IMAGE, allow_system_namespaces: bool = False) -> Plan:
    """The manifests that enforce ``policy`` for the pool and service of ``scn``.

    The window CronJobs run in UTC (``spec.timeZone: UTC``): the what-if's hours are UTC hours of
    day, and a daily UTC hour has no fixed local equivalent across a daylight-saving change.
    Team names (any value, read as text) are mapped to namespaces by
    :func:`~analytics.plan.names.map_teams`; see :class:`PlanOptions` for the keywords.

    Raises
    ------
    ConfigError
        An unknown policy or scheduler, or a MIG policy on a GPU model without a MIG table.
    """

    if policy not in POLICIES:
        raise ConfigError(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"--scheduler {scheduler!r}: choose one of {', '.join(SCHEDULERS)}")
    scn = _teams_as_text(scn)
    pool, svc = scn.pool, scn.service
    gpus = int(pool.gpus)
    reserved, reserved_why = reservation(scn)
    reserved = int(min(reserved, gpus))
    service_team = str(svc.team)
    batch_teams = sorted({str(j.team) for j in scn.batch.jobs})
    teams = map_teams([service_team, *batch_teams], taken=(SYSTEM_NS,))
    names = teams.names

    def home(ns: str) -> bool:  # whether a team's namespace may hold its LocalQueue
        return allow_system_namespaces or system_namespace(ns) is None

    inference_ns = names[service_team]
    batch_ns = sorted({names[t] for t in batch_teams} - {inference_ns})
    team_ns = sorted({ns for ns in [inference_ns, *batch_ns] if system_namespace(ns) is None})
    model = str(pool.gpu_model)
    # ResourceFlavor names carry the model; "-spot" is the longest suffix a flavor adds.
    gpu_flavor = f"gpu-{k8s_name(model, limit=63 - len('gpu-') - len('-spot'))}"
    product = {"nvidia.com/gpu.product": GPU_PRODUCT.get(model, k8s_name(model))}
    numbers = _numbers(scn, policy, gpus, reserved, reserved_why)
    p = Pool(scn=scn, gpus=gpus, reserved=reserved, gpu_flavor=gpu_flavor, product=product,
             inference_home=inference_ns if home(inference_ns) else None,
             batch_homes=[ns for ns in batch_ns if home(ns)], timezone=TIMEZONE, image=kubectl_image)
    part = kueue_part(p, policy)
    numbers.update(part.numbers)
    numbers["scheduler"] = scheduler
    notes = list(part.notes)
    files: dict[str, list[dict[str, Any]]] = dict(part.files)
    if scheduler == "kai":
        # The same plan with KAI Scheduler queues in place of Kueue's objects: KAI has no queue
        # stop, so a window is not enforced (said in the README), and its MIG/time-slicing
        # device configs are the same files.
        soft = int(round(pool.split_b * gpus)) if policy == "partitioned" else 0
        kai, what = kai_queues(policy, gpus, reserved, soft, replicas=int(numbers.get("timeslice_replicas", 1)))
        files["10-kai-queues.yaml"] = kai
        notes = [n for n in notes if not n.startswith("30-kueue")]
        notes.insert(0, f"10-kai-queues.yaml: {what}; label each workload's pods with its queue's name as "
                        "`kai.scheduler/queue`, and set `schedulerName: kai-scheduler`")
        if part.windows:
            notes.append("Not enforced under KAI: the batch window (KAI has no queue stop; the Kueue "
                         f"plan switches it at {numbers['release_hour']:05.2f} and "
                         f"{numbers['open_hour']:05.2f} UTC): schedule batch submissions in it")
        if team_ns:
            files["00-namespace.yaml"] = [namespace(ns) for ns in team_ns]
    else:
        own = [SYSTEM_NS] if part.windows else []
        files["00-namespace.yaml"] = [namespace(ns) for ns in sorted({*team_ns, *own})]
        files["10-kueue-flavors.yaml"] = part.flavors
        files["20-kueue-priorities.yaml"] = priorities()
        files["30-kueue-clusterqueues.yaml"] = part.queues
        if part.local:
            files["40-kueue-localqueues.yaml"] = part.local
        if part.windows:
            files["50-window-rbac.yaml"] = switch_rbac()
            files["60-window-cronjobs.yaml"] = part.windows
            notes.append(f"50-window-rbac.yaml: the ServiceAccount {SWITCH_SA} in {SYSTEM_NS} may get and "
                         "patch ClusterQueues, and nothing else (what the window switch needs)")
            notes.append(f"60-window-cronjobs.yaml: at {numbers['release_hour']:05.2f} h ({TIMEZONE}) the "
                         "batch queue is set to stopPolicy HoldAndDrain (admitted batch is evicted, nothing "
                         f"new is admitted); at {numbers['open_hour']:05.2f} h back to None. Kueue has no "
                         "time-based quota: this switch is Tidelens's convention, and lowering a quota "
                         "instead would not evict admitted jobs")
    files = {k: v for k, v in sorted(files.items()) if v}
    plan = Plan(policy=policy, files=files, numbers=numbers, names=names, notes=notes,
                renamed=teams.changed, system=teams.system, allow_system_namespaces=allow_system_namespaces)
    plan.readme = _readme(plan, scn)
    return plan
