"""``tidelens events``: tail events with their causes; the analysis its flags describe, which
``tidelens report`` (:mod:`analytics.cli.report_cmd`) shares. Nothing here draws: `events` starts
without plotly (0.4 s of a warm run on the sample)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from analytics.cli.commands import command_help
from analytics.cli.common import (
    add_config,
    add_db,
    add_json,
    add_slos,
    config_path,
    open_to_read,
    print_json,
    print_table,
)
from analytics.cli.progress import Progress
from analytics.errors import ConfigError
from analytics.events import EventsAnalysis, EventsConfig, load_incidents
from analytics.events.pipeline import (
    analyse_timelines,
    computed_events,
    timelines_event_ids,
)
from analytics.fieldhelp import fields_help
from analytics.slo import DEFAULT_SLO_MS, parse_service_slos, resolve_slos
from analytics.timeline import parse_step_s, store_timelines
from analytics.times import parse_time_ms
from analytics.workloads import load_map

_HELP = fields_help(EventsConfig)


def add_settings(p: argparse.ArgumentParser) -> None:
    add_db(p)
    add_slos(p, "p99 SLO in ms for every service (default: each service's from [slo] in tidelens.toml, "
                f"else the store's own, else {DEFAULT_SLO_MS:g} ms, as the app decides them)")
    p.add_argument("--step", default="1m", help="timeline step, e.g. 1m or 5m (default 1m)")
    p.add_argument("--from", dest="start", default=None, help="range start, ISO-8601 UTC (default: first data)")
    p.add_argument("--to", dest="end", default=None, help="range end, ISO-8601 UTC (default: last data)")
    for name in ("min_duration_min", "merge_gap_min"):  # the defaults are the config's (the app's too)
        default = getattr(EventsConfig, name)
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=default,
                       help=f"{_HELP[name]} (default {default:g})")
    p.add_argument("--incidents", default=None, metavar="FILE",
                   help="incident CSV (start, end, service, recorded_cause, ...) to compare causes with")
    add_config(p, "[slo] and the workload map")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help=command_help("events"))
    add_settings(p)
    add_json(p)
    p.set_defaults(func=cmd_events)


def _ms(text: str | None, flag: str) -> int | None:
    """``--from``/``--to``: :func:`analytics.times.parse_time_ms`, the one rule for typed times."""

    return None if text is None else parse_time_ms(text, what=flag)


def run_analysis(args: argparse.Namespace, stage: Callable[[str], None] = lambda _words: None, *,
                 event: str | None = None) -> EventsAnalysis:
    """The events analysis the flags describe (shared by ``events`` and ``report``), its stages
    said to ``stage``; with ``event``, an id these settings do not find is refused as soon as
    detection alone can tell (before the norm band, the latency model and the attribution)."""

    config = config_path(args)
    per_service = parse_service_slos(args.slo)  # refused before the store is read
    cfg = EventsConfig(step_s=parse_step_s(args.step), start_ms=_ms(args.start, "--from"),
                       end_ms=_ms(args.end, "--to"),
                       min_duration_min=args.min_duration_min, merge_gap_min=args.merge_gap_min)
    incidents = load_incidents(args.incidents) if args.incidents else None
    wmap = load_map(config)
    with open_to_read(args) as st:
        slos = resolve_slos(st, config=config, every_ms=args.slo_ms, per_service=per_service,
                            per_service_source="--slo")
        found = computed_events(st, cfg, wmap, incidents, slos=slos)
        if found is not None:  # computed before, by any surface: the timelines are not read
            return found
        stage("building the timelines")
        timelines = store_timelines(st, cfg.timeline_config(), wmap)
    if event is not None:
        found = timelines_event_ids(timelines, cfg, slos=slos)
        if found is not None and event not in found:
            raise no_event(event, sorted(found))
    stage("finding and attributing the tail events")
    return analyse_timelines(timelines, cfg, incidents, slos=slos)


def no_event(event: str, known: list[str]) -> ConfigError:
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "") or "none"
    return ConfigError(f"--event {event}: no such event with these settings (an id depends on the store, "
                       f"--from/--to, --slo-ms/--slo, --step, --min-duration-min and --merge-gap-min); "
                       f"`tidelens events` with the same flags lists them: {shown}")


def cmd_events(args: argparse.Namespace) -> int:
    with Progress("events", args) as stage:
        analysis = run_analysis(args, stage)
    if args.json:
        print_json([{**e.as_dict(), "map_digest": analysis.map_digest} for e in analysis.events])
    else:
        print_table(analysis.table())
        for note in analysis.notes:
            print(f"note: {note}")
    return 0
