"""``tidelens pull`` (a Prometheus-compatible server) and ``tidelens collect`` (local GPUs, NVML)."""

from __future__ import annotations

import argparse
import sys

from analytics import nvml
from analytics.access import command_line_identity
from analytics.cli.commands import command_help
from analytics.cli.common import add_config, add_db, add_json, config_path, print_json, print_table
from analytics.errors import ConfigError
from analytics.fieldhelp import field_help
from analytics.live.client import AuthConfig, ClientConfig, PromClient, allowed_servers
from analytics.live.pull import DEFAULT_MAX_SERIES, pull, pull_raw
from analytics.live.route import rules_plan
from analytics.live.timespec import parse_duration_ms
from analytics.promql import Scope, describe, fleet_queries, timeline_queries
from analytics.store import Store
from analytics.times import parse_time_ms
from analytics.workloads import load_map
from analytics.writes import recorded


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help=command_help("pull"),
                       description="Pull what the timelines need, aggregated by the server, into the "
                                   "store; or the raw series of a selector (--raw). Pulling again "
                                   "fetches only what is new. Secrets come from environment "
                                   "variables or files, never from the command line.")
    add_db(p, writes=True)
    add_json(p)
    p.add_argument("--url", required=True, help="server base URL, e.g. http://prometheus:9090")
    p.add_argument("--from", dest="start", default="now-1d",
                   help="start: ISO-8601 UTC, epoch seconds, now-2h (default now-1d)")
    p.add_argument("--to", dest="end", default="now", help="end (default now)")
    p.add_argument("--step", default="1m", help="analysis step (default 1m)")
    p.add_argument("--scope", default="pool",
                   help="pool (everything) or label=value[,label=~regex] added to every selector")
    p.add_argument("--catalogue", choices=("timeline", "fleet"), default="timeline",
                   help="timeline: what the timelines read (device series per step, services "
                        "summed); fleet: GPU counts per holder for very large fleets")
    p.add_argument("--raw", metavar="SELECTOR", default=None,
                   help="pull the raw samples of this series selector instead (drill-down)")
    p.add_argument("--raw-window", default="1h", help="raw pulls: time per request (default 1h)")
    p.add_argument("--max-series", type=int, default=DEFAULT_MAX_SERIES,
                   help=f"stop a query returning more series than this (default {DEFAULT_MAX_SERIES})")
    p.add_argument("--full", action="store_true", help="ignore what was pulled before")
    p.add_argument("--show-queries", action="store_true",
                   help="print the PromQL (copyable) and exit without pulling")
    p.add_argument("--timeout", type=float, default=ClientConfig.timeout_s,
                   help=field_help(ClientConfig, "timeout_s"))
    p.add_argument("--retries", type=int, default=ClientConfig.retries, help=field_help(ClientConfig, "retries"))
    p.add_argument("--token-env", help=field_help(AuthConfig, "bearer_token_env"))
    p.add_argument("--token-file", help=field_help(AuthConfig, "bearer_token_file"))
    p.add_argument("--user", help=field_help(AuthConfig, "basic_user"))
    p.add_argument("--password-env", help=field_help(AuthConfig, "basic_password_env"))
    p.add_argument("--password-file", help=field_help(AuthConfig, "basic_password_file"))
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                   help=field_help(AuthConfig, "headers") + " (repeatable)")
    p.add_argument("--header-env", action="append", default=[], metavar="NAME=VAR",
                   help=field_help(AuthConfig, "header_envs") + " (repeatable)")
    p.add_argument("--ca-bundle", help=field_help(AuthConfig, "ca_bundle"))
    p.add_argument("--insecure", action="store_true", help=field_help(AuthConfig, "insecure"))
    add_config(p, "[live] servers, the servers a shared deployment allows")
    p.set_defaults(func=cmd_pull)

    c = sub.add_parser("collect", help=command_help("collect"))
    add_db(c, writes=True)
    add_json(c)
    c.add_argument("--interval", default="1s", help="time between samples (default 1s)")
    c.add_argument("--duration", default="10m", help="how long to sample (default 10m)")
    c.add_argument("--flush", default="1m", help="write to the store at least this often (default 1m)")
    c.set_defaults(func=cmd_collect)


def auth_from_args(args: argparse.Namespace) -> AuthConfig:
    headers: dict[str, str] = {}
    for h in args.header:
        if ":" not in h:
            raise ConfigError(f"--header {h!r}: write NAME:VALUE")
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    header_envs: dict[str, str] = {}
    for h in args.header_env:
        if "=" not in h:
            raise ConfigError(f"--header-env {h!r}: write NAME=ENVIRONMENT_VARIABLE")
        k, v = h.split("=", 1)
        header_envs[k.strip()] = v.strip()
    return AuthConfig(bearer_token_env=args.token_env, bearer_token_file=args.token_file,
                      basic_user=args.user, basic_password_env=args.password_env,
                      basic_password_file=args.password_file, headers=headers,
                      header_envs=header_envs, ca_bundle=args.ca_bundle, insecure=args.insecure)


def _progress_line(done: int, total: int, message: str) -> None:
    sys.stderr.write(f"[{done}/{total}] {message}\n")
    sys.stderr.flush()


def _catalogue(name: str):
    return fleet_queries if name == "fleet" else timeline_queries


def cmd_pull(args: argparse.Namespace) -> int:
    step_ms = parse_duration_ms(args.step, "--step")
    scope = Scope.parse(args.scope)
    if args.show_queries:
        print(describe(_catalogue(args.catalogue)(step_ms, scope)))
        return 0
    start_ms, end_ms = parse_time_ms(args.start, what="--from"), parse_time_ms(args.end, what="--to")
    if end_ms <= start_ms:
        raise ConfigError(f"--to ({args.end}) must be after --from ({args.start})")
    client = PromClient(args.url, auth_from_args(args),
                        ClientConfig(timeout_s=args.timeout, retries=args.retries),
                        allowed=allowed_servers(config_path(args)))

    with client, Store(args.db) as st, recorded(st, command_line_identity(), "pull", client.describe()):
        if args.raw:
            report = pull_raw(st, client, args.raw, start_ms, end_ms,
                              window_ms=parse_duration_ms(args.raw_window, "--raw-window"),
                              max_series=args.max_series, incremental=not args.full,
                              progress=_progress_line)
        else:
            queries, plan = _catalogue(args.catalogue)(step_ms, scope), None
            if args.catalogue == "timeline":  # through the workload map's recording rules where recorded

                plan = rules_plan(client, start_ms, end_ms, step_ms, load_map(config_path(args)), scope)
                queries = plan.queries
            report = pull(st, client, start_ms, end_ms, step_ms=step_ms, scope=scope, queries=queries,
                          max_series=args.max_series, incremental=not args.full,
                          progress=_progress_line)
            if plan is not None:
                report.rules = plan.as_dict()
    if args.json:
        print_json(report.as_dict())
    else:
        d = report.as_dict()
        for note in (d.get("rules") or {}).get("notes", []):
            print(f"note: {note}", file=sys.stderr)
        print(f"{d['server']}: {d['requests']} requests, {d['bytes_received']:,} bytes, "
              f"{d['samples']:,} samples; {d['loaded']} chunks loaded, {d['skipped']} unchanged, "
              f"{len(d['up_to_date'])} queries already up to date")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    ok, message = nvml.available()
    if not ok:
        raise nvml.NvmlUnavailableError(message)
    cfg = nvml.CollectConfig(interval_ms=parse_duration_ms(args.interval, "--interval"),
                             duration_ms=parse_duration_ms(args.duration, "--duration"),
                             flush_ms=parse_duration_ms(args.flush, "--flush"))
    sys.stderr.write(f"sampling {message} every {args.interval} for {args.duration} (Ctrl-C stops)\n")
    results = []
    with Store(args.db) as st:
        try:
            results = nvml.collect(st, cfg, progress=_progress_line if args.duration else None)
        except KeyboardInterrupt:
            sys.stderr.write("stopped: what was sampled is in the store\n")
            results = []
    if args.json:
        print_json([r.as_dict() for r in results])
    elif results:
        import polars as pl

        print_table(pl.DataFrame([r.as_dict() for r in results]).select(
            "name", "series", "samples", "status"))
    return 0
