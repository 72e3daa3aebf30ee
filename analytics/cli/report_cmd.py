"""``tidelens report``: one tail event's postmortem, as a self-contained HTML file or Markdown
with its charts beside it, from the analysis ``tidelens events`` makes with the same flags."""

from __future__ import annotations

import argparse

from analytics.cli.commands import command_help
from analytics.cli.events_cmd import add_settings, no_event, run_analysis
from analytics.cli.progress import Progress
from analytics.document import output_format
from analytics.errors import ConfigError
from analytics.events.event import is_event_id
from analytics.postmortem import write_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help=command_help("report"))
    add_settings(p)
    p.add_argument("--event", required=True, metavar="ID", help="event id, as `tidelens events` prints it")
    p.add_argument("--out", required=True, metavar="FILE", help="FILE.html (self-contained) or FILE.md (+ PNG beside it)")
    p.add_argument("--tz", default="UTC", help="time zone of the figure's axis (default UTC)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    # What can be refused without the store is refused first: an id that is no id, an output
    # that is neither .html nor .md (the analysis takes seconds and a gigabyte of memory).
    if not is_event_id(args.event):
        raise ConfigError(f"--event {args.event!r} is not an event id (ev- and 12 hex digits, as "
                          "`tidelens events` prints them)")
    output_format(args.out, "postmortem")
    with Progress("report", args) as stage:
        analysis = run_analysis(args, stage, event=args.event)
        try:
            ev = analysis.event(args.event)
        except KeyError:
            raise no_event(args.event, [e.id for e in analysis.events]) from None
        stage("writing the postmortem")
        written = write_report(analysis, ev, args.out, tz=args.tz)
    for path in written:
        print(f"wrote {path}")
    return 0
