"""``tidelens export grafana``: the tail events as Grafana annotations and the pool story as a
dashboard, written to a folder and, with ``--url``, posted to a Grafana. ``tidelens export
rules``: the workload map as Prometheus recording rules (:mod:`analytics.rules`), with
``--tests`` the ``promtool test rules`` file that holds them to the map's Python answers.
``tidelens export alerts``: the alerting rules that read them (:mod:`analytics.rules.alerts`),
with the store's norms, SLOs and autoscaler links, and a PrometheusRule manifest of both."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from analytics.change.record import list_changes
from analytics.cli.commands import command_help
from analytics.cli.common import MEMORY, add_config, add_db, add_json, config_path, open_to_read, print_json
from analytics.config import GRAFANA_TOKEN_ENV, env_setting
from analytics.errors import ConfigError, TidelensError
from analytics.events import EventsAnalysis, EventsConfig, analyse_store
from analytics.forecast.horizon import ForecastConfig
from analytics.forecast.outlook import forecast_store
from analytics.grafana import (
    GRAFANA_CONFIG,
    check_uid,
    dashboard_model,
    event_annotations,
    forecast_annotations,
    post_annotations,
)
from analytics.outbound import HttpConfig
from analytics.rules import RulesConfig, compile_rules, map_digest, rules_yaml
from analytics.rules.alerts import (
    AlertsConfig,
    alerts_yaml,
    compile_alerts,
    hourly_norms,
    prometheus_rule,
    service_targets,
)
from analytics.rules.annotations import POLICY_ACTIONS
from analytics.rules.compile import backfill_drops_evaluations
from analytics.secrets import check_secret, secret_from_file
from analytics.slo import resolve_slos
from analytics.store import Store
from analytics.timeline import autoscaler_links, parse_step_s
from analytics.timeline.service import service_series
from analytics.workloads import WorkloadMap, classify, load_map


def _help(name: str) -> str:
    from dataclasses import fields


    return next(f.metadata["help"] for f in fields(HttpConfig) if f.name == name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=command_help("export"))
    p.add_argument("target", choices=("grafana", "rules", "alerts"),
                   help="grafana: events and a dashboard; rules: the workload map as Prometheus recording rules; "
                        "alerts: alerting rules reading them (batch-blocked inference vs a traffic surge)")
    add_db(p)
    p.add_argument("--out", required=True, metavar="DIR|FILE",
                   help="grafana: folder for annotations.json and dashboard.json; rules, alerts: the rules file "
                        "(YAML; - for standard output)")
    p.add_argument("--interval", default="1m",
                   help="rules: evaluation interval, dcgm-exporter's scrape interval, 1s to 1d (default 1m)")
    p.add_argument("--url", default=None, help="Grafana's base URL: post the annotations there")
    p.add_argument("--token-file", default=None, metavar="FILE",
                   help=f"file holding a Grafana service-account token (else ${GRAFANA_TOKEN_ENV})")
    p.add_argument("--dashboard-uid", default=None, metavar="UID",
                   help="attach the annotations to this dashboard (default: org-wide, by tag)")
    p.add_argument("--step", default="1m", help="timeline step of the events, and the alerts' (default 1m, as the app)")
    p.add_argument("--app-url", default=AlertsConfig.app_url, metavar="URL",
                   help=f"alerts: Tidelens' address, for each page's link to its Tail events (default {AlertsConfig.app_url})")
    p.add_argument("--policy", default=None, choices=sorted(POLICY_ACTIONS),
                   help="alerts: the pool's policy, for what a page says to do (default: the latest change the "
                        "store records, else shared)")
    p.add_argument("--manifest", default=None, metavar="FILE",
                   help="alerts: also write a prometheus-operator PrometheusRule with the recording rules and the alerts")
    p.add_argument("--namespace", default="monitoring", help="alerts: the PrometheusRule's namespace (default monitoring)")
    p.add_argument("--rule-label", action="append", default=[], metavar="KEY=VALUE",
                   help="alerts: a label of the PrometheusRule, for the Prometheus' ruleSelector (repeatable, "
                        "e.g. release=prometheus)")
    p.add_argument("--forecast", action="store_true",
                   help="grafana: also the collision windows `tidelens forecast` expects after the store's end, "
                        "as annotations in the future (tag tidelens-forecast; posted again, each is updated)")
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
    token = env_setting(GRAFANA_TOKEN_ENV)
    if token:
        return check_secret(token, f"environment variable {GRAFANA_TOKEN_ENV} (the Grafana token)")
    return ""


def cmd_export(args: argparse.Namespace) -> int:
    if args.target == "rules":
        return _export_rules(args)
    if args.target == "alerts":
        return _export_alerts(args)
    token = _grafana_token(args)
    config = config_path(args)
    wmap = load_map(config)
    step_s = parse_step_s(args.step, "--step")
    with open_to_read(args) as store:
        slos = resolve_slos(store, config=config)
        analysis = analyse_store(store, EventsConfig(step_s=step_s), wmap, slos=slos)
        model = dashboard_model(store, wmap=wmap, slos_ms=analysis.slos_ms)
    annotations = event_annotations(analysis, dashboard_uid=args.dashboard_uid)
    no_forecast = None
    if args.forecast:
        try:
            with open_to_read(args) as store:
                ahead = forecast_store(store, cfg=ForecastConfig(step_s=step_s), slos=slos, wmap=wmap)
            annotations += forecast_annotations(ahead.forecast, dashboard_uid=args.dashboard_uid)
        except TidelensError as exc:  # the events and the dashboard stand without it
            no_forecast = f"no forecast annotations: {exc}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "annotations.json").write_text(json.dumps(annotations, indent=2), encoding="utf-8")
    (out / "dashboard.json").write_text(json.dumps(model, indent=2), encoding="utf-8")
    report: dict = {"annotations": len(annotations), "panels": len(model.get("panels", [])),
                    "files": [str(out / "annotations.json"), str(out / "dashboard.json")]}
    if no_forecast:
        report["forecast"] = no_forecast
    if args.url:
        config = replace(GRAFANA_CONFIG, timeout_s=args.timeout, retries=args.retries)
        report["posted"] = post_annotations(args.url, token, annotations, config=config)
    if args.json:
        print_json(report)
    else:
        for f in report["files"]:
            print(f"wrote {f}")
        if no_forecast:
            print(no_forecast)
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


def _labels(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--rule-label {item!r}: write KEY=VALUE, e.g. release=prometheus")
        out[key.strip()] = value.strip()
    return out


def _write(path: Path, text: str) -> None:
    """``text`` to ``path`` whole or not at all (a failed write leaves the old file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def alert_inputs(store: Store, wmap: WorkloadMap, analysis: EventsAnalysis) -> dict[str, Any]:
    """What the alerting rules take from a store and its events analysis: each service's target
    (SLO, histogram, pool, team, autoscaler links, GPUs per replica, warm-up:
    :func:`analytics.rules.alerts.service_targets`), the norms per hour (the rhythm's band,
    :func:`analytics.rules.alerts.hourly_norms`), the pool's policy (the latest change the store
    records, else shared) and notes on what a service lacks."""
    _, services = service_series(store, wmap)
    steps = analysis.steps
    gpr = dict(steps.group_by("service").agg(pl.col("gpr").first()).iter_rows())
    warm = {k: int(round(v * 60 / analysis.cfg.step_s)) for k, v in analysis.warmup_min.items()}
    teams = {r["service"]: classify(wmap, {"namespace": r["namespace"], "workload": r["service"],
                                           "service": r["service"]}).team for r in services.iter_rows(named=True)}
    targets, notes = service_targets(services, autoscaler_links(store, wmap), slos_ms=analysis.slos_ms, teams=teams,
                                     gpus_per_replica=gpr, warmup_steps=warm)
    changes = list_changes(store)
    return {"targets": targets, "norms": hourly_norms(steps), "notes": notes,
            "policy": changes[-1].policy if changes else "shared"}


def _export_alerts(args: argparse.Namespace) -> int:
    config = config_path(args)
    cfg = RulesConfig(interval_s=parse_step_s(args.interval, "--interval"))
    step_s = parse_step_s(args.step, "--step")
    labels = _labels(args.rule_label)
    if step_s % cfg.interval_s:
        raise ConfigError(f"--step {args.step}: give a multiple of --interval {args.interval}")
    if args.db == MEMORY:
        raise ConfigError("--db :memory:: the alerts take their norms, SLOs and autoscaler links from a store "
                          "(build one with `tidelens ingest --db FILE FILES` or `tidelens pull`)")
    wmap = load_map(config)
    with open_to_read(args, hint=" or `tidelens pull`") as store:
        analysis = analyse_store(store, EventsConfig(step_s=step_s), wmap, slos=resolve_slos(store, config=config))
        got = alert_inputs(store, wmap, analysis)
    acfg = AlertsConfig(step_s=step_s, app_url=args.app_url, policy=args.policy or got["policy"],
                        material_share=analysis.cfg.mixed_share, keep_firing_min=analysis.cfg.merge_gap_min)
    doc = compile_alerts(wmap, got["targets"], got["norms"], cfg, acfg)
    digest = map_digest(wmap, cfg)
    text = alerts_yaml(doc, digest)
    report: dict[str, Any] = {
        "file": args.out, "map_digest": digest, "groups": [g["name"] for g in doc["groups"]],
        "alerts": [r["alert"] for g in doc["groups"] for r in g["rules"] if "alert" in r], "policy": acfg.policy,
        "services": [asdict(t) for t in got["targets"]], "norms": [asdict(n) for n in got["norms"]],
        "notes": got["notes"]}
    if args.manifest:
        manifest = prometheus_rule([compile_rules(wmap, cfg), doc], namespace=args.namespace, labels=labels)
        _write(Path(args.manifest), yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=100_000))
        report["manifest"] = args.manifest
    if args.out == "-" and not args.json:
        print(text, end="")
        return 0
    if args.out != "-":
        _write(Path(args.out), text)
    if args.json:
        print_json(report if args.out != "-" else {**report, "rules": doc})
        return 0
    print(f"wrote {args.out} (map digest {digest}, policy {acfg.policy}): load it beside `tidelens export rules "
          f"--interval {args.interval}`'s file; check both with `promtool check rules`")
    if args.manifest:
        print(f"wrote {args.manifest}: a PrometheusRule with both, for prometheus-operator")
    for note in got["notes"]:
        print(f"note: {note}")
    return 0
