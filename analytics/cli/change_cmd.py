"""``tidelens change``: record a change of the pool's policy, list them, see candidates, and
compare before with after (the what-if scored against what happened)."""

from __future__ import annotations

import argparse
from dataclasses import fields

import polars as pl

from analytics.access import command_line_identity
from analytics.change.basis import change_basis
from analytics.change.candidates import propose
from analytics.change.compare import CompareConfig, compare_change
from analytics.change.record import PolicyChange, change_at, list_changes, parse_window
from analytics.cli.commands import command_help
from analytics.cli.common import (add_config, add_db, add_json, add_slos, config_path, open_to_read, print_json,
                                  print_table)
from analytics.fieldhelp import fields_help
from analytics.slo import parse_service_slos, resolve_slos
from analytics.store import Store
from analytics.timeline.config import parse_step_s
from analytics.times import parse_time_ms
from analytics.whatif.policies import POLICIES
from analytics.workloads import load_map
from analytics.writes import record_policy_change

_CHANGE_FLAGS = ("reservation_gpus", "release_hour", "tidal_window", "mig_profile", "replicas_per_gpu", "note")


def _help(cls: type, name: str) -> str:
    return fields_help(cls)[name].replace("%", "%%")


def _add_change_flags(p: argparse.ArgumentParser, *, policy_required: bool) -> None:
    p.add_argument("--at", required=True, metavar="TIME", help=_help(PolicyChange, "at_ms"))
    p.add_argument("--policy", choices=POLICIES, required=policy_required, default=None,
                   help=_help(PolicyChange, "policy") + ("" if policy_required else
                                                        " (default: the change recorded at --at)"))
    kinds = {f.name: f for f in fields(PolicyChange)}
    for name in _CHANGE_FLAGS:
        flag = "--" + name.replace("_", "-")
        kind = {"reservation_gpus": int, "replicas_per_gpu": int, "release_hour": float}.get(name, str)
        meta = "START-END" if name == "tidal_window" else None
        p.add_argument(flag, type=kind, default=None, metavar=meta, help=_help(PolicyChange, kinds[name].name))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("change", help=command_help("change"))
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="record a change of the pool's policy (the same time and policy again "
                                       "replaces its parameters)")
    add_db(add, writes=True)
    _add_change_flags(add, policy_required=True)
    add_json(add)
    add.set_defaults(func=cmd_add)
    ls = verbs.add_parser("list", help="the changes the store records")
    add_db(ls)
    add_json(ls)
    ls.set_defaults(func=cmd_list)
    cand = verbs.add_parser("candidates", help="changes Tidelens sees in the data, with their evidence "
                                               "(none is recorded until you run the command it prints)")
    add_db(cand)
    cand.add_argument("--step", default="60", metavar="STEP", help="timeline step, 1s to 1d: 60, 1m, 5m (default 60 s)")
    add_config(cand, "the workload map")
    add_json(cand)
    cand.set_defaults(func=cmd_candidates)
    cmp_ = verbs.add_parser("compare", help="before and after a change, the same definitions on both sides, "
                                            "and the what-if's prediction scored")
    add_db(cmp_)
    _add_change_flags(cmp_, policy_required=False)
    for f in fields(CompareConfig):
        flag = "--" + f.name.replace("_", "-")
        cmp_.add_argument(flag, type=float if f.name.endswith("days") else str, default=f.default,
                          help=_help(CompareConfig, f.name) + (f" (default {f.default:g})" if f.default else ""))
    add_slos(cmp_, "one p99 SLO (ms) for every service")
    cmp_.add_argument("--step", default="60", metavar="STEP", help="timeline step, 1s to 1d: 60, 1m, 5m (default 60 s)")
    cmp_.add_argument("--no-score", action="store_true", help="only the before/after numbers (no calibration)")
    add_config(cmp_, "[slo] and the workload map")
    add_json(cmp_)
    cmp_.set_defaults(func=cmd_compare)


def _change_from(args: argparse.Namespace, at_ms: int, policy: str, source: str) -> PolicyChange:
    window = parse_window(args.tidal_window) if args.tidal_window else None
    return PolicyChange(at_ms=at_ms, policy=policy, reservation_gpus=args.reservation_gpus,
                        release_hour=args.release_hour, tidal_window=window, mig_profile=args.mig_profile,
                        replicas_per_gpu=args.replicas_per_gpu, note=args.note or "", source=source).validate()




def cmd_add(args: argparse.Namespace) -> int:
    change = _change_from(args, parse_time_ms(args.at, what="--at"), args.policy, "tidelens change add")
    # Through the one write path the app takes: the change is in the audit record too.
    record_policy_change(command_line_identity(), lambda: Store(args.db), change)
    if args.json:
        print_json(change.as_dict())
    else:
        print(f"recorded: {change.describe()}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with open_to_read(args) as store:
        changes = [c.as_dict() for c in list_changes(store)]
    if args.json:
        print_json(changes)
    elif not changes:
        print("no changes recorded; record one with `tidelens change add --db DB --at TIME --policy NAME`")
    else:
        print_table(pl.DataFrame([{k: str(v) for k, v in c.items() if k != "at_ms"} for c in changes]))
    return 0


def cmd_candidates(args: argparse.Namespace) -> int:
    with open_to_read(args) as store:
        path = store.path
        found = propose(store, step_s=parse_step_s(args.step, "--step"), wmap=load_map(config_path(args)), recorded=list_changes(store))
    if args.json:
        print_json([c.as_dict() for c in found])
        return 0
    if not found:
        print("no candidate changes in the data")
    for c in found:
        print(f"{c.change.describe()}{'  [recorded]' if c.recorded else ''}\n  evidence: {c.evidence}\n"
              f"  to record it: {c.command(str(path))}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    at = parse_time_ms(args.at, what="--at")
    cfg = CompareConfig(before_days=args.before_days, after_days=args.after_days, service=args.service or None).validate()
    with open_to_read(args) as store:
        change = change_at(store, at) if args.policy is None else _change_from(args, at, args.policy, "--policy")
        slos = resolve_slos(store, config=config_path(args), every_ms=args.slo_ms,
                            per_service=parse_service_slos(args.slo), per_service_source="--slo")
        basis = change_basis(store, step_s=parse_step_s(args.step, "--step"), slos=slos, wmap=load_map(config_path(args)))
    out = compare_change(basis, at, cfg, change, score=not args.no_score)
    if change is None:
        out.missing["score"] = ("no change recorded at this time: record it with `tidelens change add` "
                                 "(or give --policy) to score the what-if")
    if args.json:
        print_json(out.as_dict())
        return 0
    for s in out.sentences:
        print(s)
    rows = []
    for key, label in (("violation_minutes", f"minutes over the SLO, {out.service}"),
                       ("minutes_over_slo_any", "minutes over the SLO, any service"), ("events", "tail events"),
                       ("batch_gpu_hours", "batch GPU-hours"), ("batch_queue_delay_min", "batch queueing delay (min)"),
                       ("gpus_idle_mean", "GPUs idle (mean)"), ("gpus_held_mean", "GPUs held (mean)"),
                       ("requests_per_day", "requests a day")):
        b, a = getattr(out.before, key), getattr(out.after, key)
        rows.append({"measure": label, "before": "n/a" if b is None else f"{b:,.1f}",
                     "after": "n/a" if a is None else f"{a:,.1f}"})
    print_table(pl.DataFrame(rows))
    for part, why in out.missing.items():
        print(f"not shown: {part}: {why}")
    return 0
