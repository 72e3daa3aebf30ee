"""``tidelens plan``: the chosen policy as the Kueue, MIG and time-slicing manifests that enforce it."""

from __future__ import annotations

import argparse

from analytics.cli.commands import command_help
from analytics.cli.common import add_json, print_json
from analytics.cli.whatif_cmd import add_scenario_source, load_scenario
from analytics.fieldhelp import field_help
from analytics.plan import DEFAULT_KUBECTL_IMAGE, SCHEDULERS, PlanOptions, make_plan, write_plan
from analytics.whatif import POLICIES, form


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help=command_help("plan"))
    add_scenario_source(p)
    p.add_argument("--policy", required=True, choices=POLICIES, help="the policy to enforce")
    p.add_argument("--scheduler", choices=SCHEDULERS, default="kueue", help=field_help(PlanOptions, "scheduler"))
    p.add_argument("--reservation-gpus", type=int, default=None, metavar="N",
                   help="GPUs the inference class owns (default: the scenario's, -1 = what the "
                        "peak needed plus the headroom, as the What-if page)")
    p.add_argument("--headroom", type=float, default=None, metavar="SHARE",
                   help="share above the peak need an automatic reservation keeps (0.3 = 30%%)")
    p.add_argument("--kubectl-image", default=None, metavar="IMAGE", help=field_help(PlanOptions, "kubectl_image"))
    p.add_argument("--allow-system-namespaces", action="store_true",
                   help=field_help(PlanOptions, "allow_system_namespaces"))
    p.add_argument("--out", required=True, metavar="DIR", help="folder the manifests and README.md go to")
    add_json(p)
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    scn = load_scenario(args)
    edits = {k: v for k, v in (("pool.reservation_gpus", args.reservation_gpus),
                               ("pool.headroom", args.headroom)) if v is not None}
    scn = form.apply(scn, edits)
    plan = make_plan(scn, args.policy, scheduler=args.scheduler,
                     kubectl_image=args.kubectl_image or DEFAULT_KUBECTL_IMAGE,
                     allow_system_namespaces=args.allow_system_namespaces)
    written = write_plan(plan, args.out)
    if args.json:
        print_json({"numbers": plan.numbers, "names": plan.names, "renamed": plan.renamed,
                    "system_namespaces": plan.system, "allow_system_namespaces": plan.allow_system_namespaces,
                    "files": [str(p) for p in written]})
    else:
        for path in written:
            print(f"wrote {path}")
        for line in plan.name_messages():
            print(line)
    return 0
