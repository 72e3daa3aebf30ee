"""``tidelens export grafana``: the tail events as Grafana annotations and the pool story as a
dashboard, written to a folder and, with ``--url``, posted to a Grafana. ``tidelens export
rules``: the workload map as Prometheus recording rules (:mod:`analytics.rules`), with
``--tests`` the ``promtool test rules`` file that holds them to the map's Python answers."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from analytics.cli.commands import command_help
from analytics.cli.common import add_config, add_db, add_json, config_path, open_to_read, print_json
from analytics.events import EventsConfig, analyse_store
from analytics.grafana import GRAFANA_CONFIG, check_uid, dashboard_model, event_annotations, post_annotations
from analytics.outbound import HttpConfig
from analytics.rules import RulesConfig, compile_rules, map_digest, rules_yaml
from analytics.rules.compile import backfill_drops_evaluations
from analytics.secrets import secret_from_env, secret_from_file
from analytics.slo import resolve_slos
from analytics.timeline import parse_step_s
from analytics.workloads import load_map

TOKEN_ENV = "TIDELENS_GRAFANA_TOKEN"


def _help(name: str) -> str:
    from dataclasses import fields


    return next(f.metadata["help"] for f in fields(HttpConfig) if f.name == name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=command_help("export"))
    p.add_argument("target", choices=("grafana", "rules"),
                   help="grafana: events and a dashboard; rules: the workload map as Prometheus recording rules")
    add_db(p)
    p.add_argument("--out", required=True, metavar="DIR|FILE",
                   help="grafana: folder for annotations.json and dashboard.json; rules: the rules file "
                        "(YAML; - for standard output)")
    p.add_argument("--interval", default="1m",
                   help="rules: evaluation interval, dcgm-exporter's scrape interval, 1s to 1d (default 1m)")
    p.add_argument("--url", default=None, help="Grafana's base URL: post the annotations there")
    p.add_argument("--token-file", default=None, metavar="FILE",
                   help=f"file holding a Grafana service-account token (else ${TOKEN_ENV})")
    p.add_argument("--dashboard-uid", default=None, metavar="UID",
                   help="attach the annotations to this dashboard (default: org-wide, by tag)")
    p.add_argument("--step", default="1m", help="timeline step of the events (default 1m, as the app)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help=_help("timeout_s") + " (default 10)")
    p.add_argument("--retries", type=int, default=2, help=_help("retries") + " (default 2; never a POST "
                   "Grafana may have acted on)")
    add_config(p, "[slo] and the workload map")
    add_json(p)
    p.set_defaults(func=cmd_export)


def _grafana_token(args: argparse.Namespace) -> str:
    """The token to post with (``""``: none given), read and checked before any work, so a bad
    token file or uid costs nothing and is never shown."""

    if args.dashboard_uid is not None:
        check_uid(args.dashboard_uid)
    if not args.url:
        return ""
    if args.token_file:
        return secret_from_file(args.token_file, "Grafana token")
    if os.environ.get(TOKEN_ENV):
        return secret_from_env(TOKEN_ENV, "Grafana token")
    return ""


def cmd_export(args: argparse.Namespace) -> int:
    if args.target == "rules":
        return _export_rules(args)
    token = _grafana_token(args)

    import json
    from dataclasses import replace


    config = config_path(args)
    wmap = load_map(config)
    with open_to_read(args) as store:
        slos = resolve_slos(store, config=config)
        analysis = analyse_store(store, EventsConfig(step_s=parse_step_s(args.step, "--step")), wmap, slos_ms=slos)
        model = dashboard_model(store, wmap=wmap, slos_ms=dict(analysis.slos_ms))
    annotations = event_annotations(analysis, dashboard_uid=args.dashboard_uid)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "annotations.json").write_text(json.dumps(annotations, indent=2), encoding="utf-8")
    (out / "dashboard.json").write_text(json.dumps(model, indent=2), encoding="utf-8")
    report: dict = {"annotations": len(annotations), "panels": len(model.get("panels", [])),
                    "files": [str(out / "annotations.json"), str(out / "dashboard.json")]}
    if args.url:
        config = replace(GRAFANA_CONFIG, timeout_s=args.timeout, retries=args.retries)
        report["posted"] = post_annotations(args.url, token, annotations, config=config)
    if args.json:
        print_json(report)
    else:
        for f in report["files"]:
            print(f"wrote {f}")
        for done in report.get("posted", []):
            print(f"{done['action']} annotation {done['id']} for event {done['event']}")
    return 0


def _export_rules(args: argparse.Namespace) -> int:
    import sys


    wmap = load_map(config_path(args))
    cfg = RulesConfig(interval_s=parse_step_s(args.interval, "--interval"))
    doc = compile_rules(wmap, cfg)
    groups = [g["name"] for g in doc["groups"]]
    if args.out == "-":
        if args.json:  # JSON is YAML: the rules themselves, as a rules file Prometheus reads
            print_json({"file": "-", "map_digest": map_digest(wmap, cfg), "groups": groups, "rules": doc})
        else:
            sys.stdout.write(rules_yaml(wmap, cfg, doc))
        return 0
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(rules_yaml(wmap, cfg, doc), encoding="utf-8")
    tmp.replace(out)
    report = {"file": str(out), "map_digest": map_digest(wmap, cfg), "groups": groups,
              "backfill_name": _backfill_name(out, groups, cfg.interval_s)}
    if args.json:
        print_json(report)
    else:
        print(f"wrote {out} (map digest {report['map_digest']}); check it with `promtool check rules {out}`")
        if report["backfill_name"] != str(out):
            print(f"to backfill with `promtool tsdb create-blocks-from rules`, give it as {report['backfill_name']}: "
                  f"under the name {out} promtool's 2-hour blocks drop the evaluation in their last second "
                  "(one step in 120 missing; docs/rules.md)")
    return 0


def _backfill_name(out: Path, groups: list[str], interval_s: int) -> str:
    """``out`` as given, or the nearest sibling name promtool's rules backfill keeps every
    evaluation of (:func:`analytics.rules.compile.backfill_drops_evaluations`)."""

    for i in range(1000):
        name = out if i == 0 else out.with_name(f"{out.stem}-{i}{out.suffix}")
        if not any(backfill_drops_evaluations(str(name), g, interval_s) for g in groups):
            return str(name)
    return str(out)
