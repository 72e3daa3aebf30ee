"""``tidelens review``: the capacity-review report of a store's range (.html or .md), or its numbers."""

from __future__ import annotations

import argparse
import sys

from analytics.cli.commands import command_help
from analytics.cli.common import add_config, add_db, add_json, add_slos, check_zone, config_path, open_to_read, print_json
from analytics.cli.events_cmd import _ms
from analytics.cli.progress import Progress
from analytics.document import output_format
from analytics.errors import ConfigError
from analytics.review import STAGES, review_store, write_review
from analytics.slo import parse_service_slos, resolve_slos
from analytics.timeline import parse_step_s
from analytics.workloads import load_map


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("review", help=command_help("review"))
    add_db(p)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="FILE.html (self-contained, opens offline) or FILE.md (+ a PNG per chart beside it)")
    p.add_argument("--step", default="1m", help="timeline step, e.g. 1m or 5m (default 1m, as the app)")
    p.add_argument("--from", dest="start", default=None, help="range start, ISO-8601 UTC (default: first data)")
    p.add_argument("--to", dest="end", default=None, help="range end, ISO-8601 UTC (default: last data)")
    add_slos(p, "p99 SLO in ms for every service (default: each service's, as `tidelens events`)")
    p.add_argument("--tz", default="UTC", help="time zone of hours and chart axes (default UTC)")
    add_config(p, "[slo] and the workload map")
    add_json(p)
    p.set_defaults(func=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    if not args.out and not args.json:
        raise ConfigError("say where the review goes: --out review.html (or .md), or --json for its numbers")
    if args.out:
        output_format(args.out, "review")  # before the minutes of analysis, not after
    check_zone(args.tz)
    config = config_path(args)
    written = []
    with Progress("review", args) as stage:
        with open_to_read(args) as store:
            review = review_store(store, step_s=parse_step_s(args.step), start_ms=_ms(args.start, "--from"),
                                  end_ms=_ms(args.end, "--to"),
                                  slos=resolve_slos(store, config=config, every_ms=args.slo_ms,
                                                    per_service=parse_service_slos(args.slo),
                                                    per_service_source="--slo"),
                                  wmap=load_map(config), tz=args.tz, on_stage=stage)
        if args.out:
            stage(STAGES["render"])
            written = write_review(review, args.out)
    for path in written:
        # With --json, stdout is the JSON alone (a pipe to jq); the paths go to stderr.
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print_json(review.numbers().as_dict())
    return 0
