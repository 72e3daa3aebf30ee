"""A plan's README: what each file enforces, the modelled numbers it carries, the order to apply
it in, and how team names became namespaces. Every value that can come from the input (a team,
a GPU model, a number's source) passes :func:`analytics.text.md_line`, so a name can neither
add HTML, a heading, a table row nor a line of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analytics.plan.objects import INFERENCE_PRIORITY, TRAINING_PRIORITY
from analytics.plan.windows import SYSTEM_NS
from analytics.text import md_line

if TYPE_CHECKING:
    from analytics.plan.result import Plan

KUEUE_VERSION = ("Kueue v0.15 or later (it serves `kueue.x-k8s.io/v1beta2` from v0.15.0, and "
                 "stores it from v0.16)")
POLICY_PROSE = [
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
    "over-quota weight, limit) take Kueue's place; the device configs are the same.",
]


def _team(team: str) -> str:
    return md_line(team) or "(empty)"


def names_section(plan: Plan) -> list[str]:
    """The team-name mapping and the system namespaces the plan left alone, as README lines."""
    own = any(o["kind"] == "Namespace" and o["metadata"]["name"] == SYSTEM_NS for o in plan.objects())
    lines = ["## Team names", "",
             "Every name the plan writes is a Kubernetes DNS-1123 label: lower-case letters, digits "
             "and `-`, starting and ending with a letter or digit, 63 characters at most (a "
             "Namespace's rule; queue and priority names are label values too). A team name that is "
             "not one is mapped: accents dropped, lower-cased, other characters turned to `-`; one "
             "too long is cut and a hash of the name appended, and so is one that would land on "
             "another team's namespace or the plan's own" + (f" (`{SYSTEM_NS}`)" if own else "")
             + ". Teams are shown as "
             "written, escaped (a newline as `\\n`).", "",
             "| team | namespace | why it differs |", "|---|---|---|"]
    lines += [f"| {_team(team)} | `{name}` | {md_line(plan.renamed.get(team, 'unchanged'))}"
              + (" (a system namespace: see below)" if team in plan.system else "") + " |"
              for team, name in plan.names.items()]
    lines.append("")
    if plan.system:
        lines += ["## System namespaces", ""]
        what = md_line(plan.system_effect())
        lines += [f"- team {_team(team)}: `{plan.names[team]}` is {md_line(why)}; {what}."
                  for team, why in plan.system.items()]
        lines.append("")
    return lines


def readme(plan: Plan, scn: Any) -> str:
    """The README of ``plan``, made for the scenario ``scn``."""
    n = plan.numbers
    lines = [f"# Tidelens plan: {md_line(plan.policy)}", "",
             f"The manifests that enforce the what-if's `{plan.policy}` policy for team "
             f"{_team(str(scn.service.team))}'s service on a pool of {n['pool_gpus']} GPUs "
             f"({md_line(scn.pool.gpu_model)}). Generated from the scenario the What-if page (or "
             "`tidelens whatif`) modelled; its numbers are these:", ""]
    lines += [f"- `{k}`: {md_line(v)}" for k, v in n.items()]
    lines += ["", "## What each file enforces", ""]
    lines += [f"- {note}" for note in plan.notes]
    static = {
        "00-namespace.yaml": "the team namespaces the queues serve (and the window switch's own); "
                             "never a system namespace. Skip it where the namespaces exist, and "
                             "never `kubectl delete -f` it: deleting a Namespace deletes "
                             "everything in it",
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
              (KUEUE_VERSION if n["scheduler"] == "kueue"
               else "The KAI Scheduler (queues `scheduling.run.ai/v2`)")
              + " and, for MIG or time-slicing, the NVIDIA GPU Operator installed first; then "
              "`kubectl apply -f` each file in name order.", ""]
    lines += names_section(plan)
    lines += ["## Policies and their objects", "", *POLICY_PROSE, ""]
    return "\n".join(lines)
