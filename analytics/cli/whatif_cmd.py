"""``tidelens whatif``: replay one demand under each pool policy and compare them."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import polars as pl

from analytics.cli.commands import command_help
from analytics.cli.common import add_config, add_json, add_slos, config_path, open_to_read, print_json, print_table
from analytics.cli.progress import Progress
from analytics.errors import ConfigError
from analytics.slo import SloTable, parse_service_slos, resolve_slos
from analytics.timeline import TimelineConfig, store_timelines
from analytics.whatif import (POLICIES, PRESETS, SUMMARY_KEYS, PoolScenario, compare, reservation,
                              scenario_from_toml)
from analytics.whatif.answer import PoolAnswer, PoolCalibration, answer_for, calibrate_pool, scenario_answer
from analytics.whatif.calibrate import Calibration, calibrate_timelines
from analytics.whatif.form import MODEL_DAYS, last_days
from analytics.whatif.observe import pick_service
from analytics.whatif.transforms import Transforms, apply_transforms, transform_specs, transforms_of
from analytics.workloads import load_map
from analytics.store import DEFAULT_DB, Store


def add_scenario_source(p: argparse.ArgumentParser) -> None:
    """The flags that name a scenario (``whatif`` and ``plan`` alike): a store to calibrate, a
    preset or a saved TOML, and the settings :func:`load_scenario` reads."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--db", default=None,
                     help="calibrate the scenario from this store (traffic, service rate, "
                          "warm-up, batch jobs, pool size; see the JSON's provenance); without "
                          f"--db, --preset or --scenario: {DEFAULT_DB} when it exists, else the "
                          "bundled sample, as the app opens")
    src.add_argument("--preset", choices=sorted(PRESETS), default=None,
                     help="a built-in scenario: " + ", ".join(sorted(PRESETS)))
    src.add_argument("--scenario", default=None, metavar="FILE.toml",
                     help="a scenario saved as TOML (the What-if page's 'save')")
    add_slos(p, "override the service's p99 SLO (ms)")
    p.add_argument("--days", type=int, default=None,
                   help="preset length in days (default: the preset's own, 7); with --db, the "
                        f"period's last days the what-ifs replay (default {MODEL_DAYS}, as the "
                        "What-if page; the backtest always replays the whole period)")
    p.add_argument("--service", default=None,
                   help="with --db: the inference service whose rows are shown (default: the one most "
                        "often above its SLO); the best policy is the pool's, judged over every "
                        "service on it")
    p.add_argument("--step", type=int, default=60, metavar="SECONDS",
                   help="with --db: timeline step in seconds (default 60)")
    add_config(p, "[slo] and the workload map (with --db; the What-if page reads the same)")
    fwd = p.add_argument_group("forward-looking what-ifs (never the default: without them the batch is "
                               "the runs that happened)")
    for spec in transform_specs():
        flag = "--" + spec["name"].replace("_", "-")
        words = spec["help"].replace("%", "%%")  # argparse formats help with %
        if isinstance(spec["default"], bool):
            fwd.add_argument(flag, action="store_true", help=words)
        else:
            fwd.add_argument(flag, type=type(spec["default"]), default=spec["default"],
                             help=f"{words} (default {spec['default']})")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("whatif", help=command_help("whatif"))
    add_scenario_source(p)
    p.add_argument("--policy", action="append", choices=POLICIES, default=None,
                   help="policy to model (repeatable; default: all)")
    p.add_argument("--backtest", action="store_true",
                   help="kept for old scripts: with --db the backtest (the observed period replayed "
                        "under the observed, shared policy, against the store) is always reported")
    add_json(p)
    p.set_defaults(func=cmd_whatif)


def load_scenario(args: argparse.Namespace) -> PoolScenario:
    """The scenario the arguments name, with ``--slo-ms`` applied."""
    if args.preset:
        build = PRESETS[args.preset]
        scn = build(args.days) if args.days else build()
    elif args.scenario:
        path = Path(args.scenario)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the scenario ({exc.strerror}); "
                              "check the path") from None
        try:
            scn = scenario_from_toml(text)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    else:
        scn = _calibrated(args)
    if args.slo and (args.preset or args.scenario):
        raise ConfigError("--slo SERVICE=MS names a service of a store (--db); a preset or scenario "
                          "file models one service: use --slo-ms")
    if args.slo_ms is not None and not args.slo:  # with --slo, the calibration's table decided
        scn = dataclasses.replace(scn, service=dataclasses.replace(scn.service,
                                                                   slo_ms=args.slo_ms))
        scn.provenance = {**scn.provenance, "service.slo_ms": "user (--slo-ms)"}
    return apply_transforms(scn, _transforms(args))


def _transforms(args: argparse.Namespace) -> Transforms:
    """The forward-looking what-ifs the flags chose."""
    return Transforms(**{spec["name"]: getattr(args, spec["name"], spec["default"])
                         for spec in transform_specs()})


def _slos(args: argparse.Namespace, store: Store) -> SloTable:
    """Each service's SLO as the app decides it, under --slo and --slo-ms (:func:`analytics.slo.resolve_slos`)."""
    return resolve_slos(store, config=config_path(args), every_ms=args.slo_ms, per_service=parse_service_slos(args.slo),
                        per_service_source="--slo")


def _calibrated(args: argparse.Namespace) -> PoolScenario:
    """The scenario of ``--service`` (else the service most often above its SLO); the pool's
    other services are calibrated when the answer asks for them (``args._pool``), never for
    ``tidelens plan``, which enforces one scenario."""
    with open_to_read(args, hint=", use --preset for a built-in scenario") as store:
        # The workload map the app calibrates with, so that the CLI and the page agree.
        wmap = load_map(config_path(args))
        slos = _slos(args, store)
        tl = store_timelines(store, TimelineConfig(step_s=args.step), wmap)

    def calibrate(name: str) -> Calibration:
        return calibrate_timelines(tl, service=name, step_s=args.step, slos=slos)

    name = args.service or pick_service(tl.services, slos)
    cal = calibrate(name)
    args._backtest = {k: v for k, v in cal.backtest.items() if k != "frame"}
    args._pool = lambda: calibrate_pool(tl.services, slos, lambda n: cal if n == name else calibrate(n),
                                        service=name)
    return last_days(cal.scenario, args.days or MODEL_DAYS)


def _answer(args: argparse.Namespace, scn: PoolScenario, policies: tuple[str, ...],
            results: dict) -> PoolAnswer:
    """The pool's answer: every service of the store's pool (``scn``'s edits and transforms
    standing for the pool's), or the one service of a preset or a scenario file."""
    pool: PoolCalibration | None = getattr(args, "_pool", lambda: None)()
    if pool is None:
        return scenario_answer(scn, results)
    return answer_for(pool, days=args.days or MODEL_DAYS, policies=policies, edited=pool.picked, scenario=scn,
                      transforms=_transforms(args),
                      replay=lambda s: results if s is scn else compare(s, policies))


def cmd_whatif(args: argparse.Namespace) -> int:
    with Progress("whatif", args) as stage:
        stage("building the scenario" if args.preset or args.scenario else "calibrating the scenario on the store")
        scn = load_scenario(args)
        policies = tuple(dict.fromkeys(args.policy)) if args.policy else POLICIES
        stage("replaying the pool policies")
        results = compare(scn, policies)
        stage("the pool's answer: every service of the pool")
        answer = _answer(args, scn, policies, results)
    reserved, why = reservation(scn)
    out = {
        "scenario": {"name": scn.name, "description": scn.description, "steps": scn.steps,
                     "step_s": scn.step_s, "start_ts_ms": scn.start_ts_ms,
                     "slo_ms": scn.service.slo_ms, "pool_gpus": scn.pool.gpus,
                     "reservation_gpus": reserved, "reservation_source": why,
                     "headroom": scn.pool.headroom, "provenance": scn.provenance,
                     "transforms": transforms_of(scn)},
        "policies": {name: {**r.summary.as_dict(), "externality": r.externality}
                     for name, r in results.items()},
        # The pool's: every service on it, each against its own SLO (the scenario's rows above
        # are one service's, a breakdown).
        "best_policy": answer.best_policy,
        "pool": answer.as_dict(),
    }
    if getattr(args, "_backtest", None) is not None:
        out["backtest"] = args._backtest
    if args.json:
        print_json(out)
        return 0
    rows = [{"policy": name, **{k: getattr(r.summary, k) for k in SUMMARY_KEYS}}
            for name, r in results.items()]
    print(answer.sentence())
    print_table(answer.breakdown())
    print()
    print(f"Breakdown, {scn.modelled_service()}: {scn.description} ({scn.steps} steps of {scn.step_s} s, "
          f"SLO p99 {scn.service.slo_ms:g} ms; inference reservation {reserved} GPUs: {why})")
    bt = getattr(args, "_backtest", None)
    if bt is not None:
        print(f"backtest (the observed period under the shared policy): violation minutes "
              f"{bt['model_violation_minutes']:,.0f} replayed vs {bt['observed_violation_minutes']:,.0f} "
              f"observed; batch {bt['model_batch_gpu_hours']:,.0f} GPU-h vs "
              f"{bt['observed_batch_gpu_hours']:,.0f}")
        for miss in bt["misses"]:
            print(f"WARNING: the replay misses what happened: {miss}; the policies below are a "
                  "model this store does not confirm")
    print(f"each policy's violation_minutes: {scn.modelled_service()}'s minutes over its SLO alone, modelled")
    print_table(pl.DataFrame(rows))
    print(f"best policy for the pool ({answer.scope()}; fewest whole minutes over the SLO, ties to "
          f"the least batch work forgone, then the cheaper): {answer.best_policy}")
    return 0
